--[[
lease.lua: quota leasing for one hot key (RateLimiter option `lease`): take a block of the key's
allowance, or give back what a block did not use, in one atomic call. It mirrors
core/lease-block.ts (takeBlock, giveBack) operation for operation, and works on the key's own
state, stored exactly as ratekeeper.lua stores it, so leasing and per-decision instances of one
policy share the allowance; the differential test (test/lease-redis.test.ts) holds them together.
Algorithms with a two-number state only: fixed window, token bucket, leaky bucket (police), GCRA.

KEYS[1]  the limit's state: <prefix>{<namespace>:<key>} (leasing has one limit), two numbers a, b (fixed window: window
         start in ms and units counted; bucket: time of the last update in ms and level in
         units x windowMs), packed "<i6i6" when both are whole numbers in [0, 2^47), else "<dd"
KEYS[2]  the key's lessees: a sorted set, member = instance id, score = when it last took a block
         (ms); same hash tag. Expires max(horizonMs, minTtlMs) after the last take.
KEYS[3]  the key's reset epoch: <KEYS[1]>:e, an integer that ratekeeper.lua's reset ("x") raises
         (same hash tag); absent: 0. A block belongs to the epoch it was taken in: after a reset
         its units were taken against a count that no longer exists, so a give-back of a block
         of another epoch does nothing (its units would be admitted a second time), and the
         instance drops what it still holds of such a block when a take tells it the new epoch.
ARGV[1]  mode: "t" take a block, "g" give units back
ARGV[2]  nowMs: integer ms since the epoch, or "" for the server's clock (TIME)
ARGV[3]  kind: "f" fixed window aligned on the clock, "n" the same in ratekeeper.lua's counter
         layout (one integer: see stores/redis/counter.ts), "F" fixed window from the first request,
         "b" bucket (token bucket, leaky bucket, GCRA)
ARGV[4]  limit: units per window (the bucket drains limit per windowMs)
ARGV[5]  windowMs: integer ms
ARGV[6]  capacity: units (limit for a fixed window; the bucket's size; burst + 1 for GCRA)
ARGV[7]  minTtlMs: integer ms, the least PEXPIRE given to a written key
ARGV[8]  t: want, units the instance asks for (>= 1); g: units given back
ARGV[9]  t: the instance's id (a string); g: the block's blockStart from its take (fixed window:
         its window's start, the units go back only into that window; bucket: when it was taken,
         the units are credited less what the bucket drained since)
ARGV[10] t: horizonMs, how long an instance counts as a lessee after its last take;
         g: the block's epoch (the 8th integer of its take's reply)
Reply    t: 8 integers: taken (units, 0: none), validMs (fixed window: ms until its window ends;
         bucket: 0), waitMs (taken 0: ms until a block may be available), resetAfterMs,
         blockStart (fixed window: the window's start; bucket: now, in ms), lessees (instances
         that took a block within horizonMs, this one included), left (units the state still has
         after this take, which others may take: with the block's, a decision's remaining),
         epoch (the key's reset epoch, KEYS[3], whether or not a block was taken)
         g: 0
         Either mode, a key holding a value the store did not write (another program's list or
         hash: WRONGTYPE; a string in no layout of ours, as ratekeeper.lua's checks): { "<key>: <error>" }
         (one string, the marker of stores/redis/foreign-value.ts), and nothing written: every
         key is read and checked before the first write.
Blocks are at most max(1, floor(capacity / (2 * lessees))), and a bucket gives nothing below
max(1, min(want, floor(that / 2))) (see core/lease-block.ts for why).
]]
local mode = ARGV[1]
-- The caller's time, or Redis's own (TIME: seconds, microseconds) when it sends "". concurrency.lua
-- reads it in the same lines: each script is a file of its own, loaded and hashed alone.
local now
if ARGV[2] == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
end
local kind = ARGV[3]
local limit, W, capacity, minTtl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local units = tonumber(ARGV[8])
local key = KEYS[1]
local floor, ceil = math.floor, math.ceil

-- A foreign value (see Reply): `at` the key, `e` Redis's error (a table) or the check's text. An
-- error that is not WRONGTYPE (OOM, READONLY...: Redis cannot serve) fails the call as before.
local FOREIGN = "a value the store did not write, in no layout of ratekeeper's ("
local function foreign(at, e)
  if type(e) == "table" then
    if not string.find(tostring(e.err), "^WRONGTYPE") then error(e) end
    e = e.err
  end
  return { at .. ": " .. e }
end

local raw = redis.pcall("GET", key)
if type(raw) == "table" then return foreign(key, raw) end
local a, b = 0, 0
-- Kind "n": the counter layout of ratekeeper.lua (stores/redis/counter.ts), one integer
-- tag * SPAN + count; a tag more than HALF windows from now's is a window that is over (fresh).
local SPAN, TAGS, HALF = 549755813888, 16383, 8191
if raw and kind == "n" then
  local v = tonumber(raw)
  -- Below SPAN (tag 0) but not 0: a number of another program's (ours carry a tag >= 1), as in
  -- ratekeeper.lua; read as a window that is over, it was overwritten.
  if v == nil or (v ~= 0 and v < SPAN) then return foreign(key, FOREIGN .. #raw .. " bytes)") end
  local tag = floor(v / SPAN)
  local w = (now - now % W) / W
  local d = (tag - (w % TAGS + 1)) % TAGS
  if tag >= 1 and d <= HALF then
    a = (w + d) * W
    b = v - tag * SPAN
    if b > limit then b = limit end
  else
    a = -math.huge -- a window that is over: the window is the clock's
  end
elseif raw then
  if #raw ~= 12 and #raw ~= 16 then return foreign(key, FOREIGN .. #raw .. " bytes)") end
  if #raw == 12 then a, b = struct.unpack("<i6i6", raw) else a, b = struct.unpack("<dd", raw) end
end

local function put(na, nb, resetMs)
  if kind == "n" then
    -- A counter key lives minTtlMs past its window's end, as ratekeeper.lua writes it.
    local v = string.format("%.0f", ((na / W) % TAGS + 1) * SPAN + nb)
    redis.call("SET", key, v, "PX", math.max(na + W - now + minTtl, 1))
    return
  end
  local v
  if na >= 0 and na < 140737488355328 and floor(na) == na and nb >= 0 and nb < 140737488355328 and floor(nb) == nb then
    v = struct.pack("<i6i6", na, nb)
  else
    v = struct.pack("<dd", na, nb)
  end
  local ttl = resetMs
  if ttl < minTtl then ttl = minTtl end
  if ttl < 1 then ttl = 1 end
  redis.call("SET", key, v, "PX", ttl)
end

-- fixed-window.ts windowStart
local function windowStart()
  if kind == "F" then
    if b > 0 and now - a < W then return a end
    return now
  end
  local s = now - now % W
  if a > s then s = a end
  return s
end

-- bucket.ts levelAt
local function levelAt()
  local elapsed = now - a
  if elapsed <= 0 then return b end
  if elapsed >= ceil(b / limit) then return 0 end
  return b - elapsed * limit
end

-- The key's reset epoch (see KEYS[3]).
local rawEpoch = redis.pcall("GET", KEYS[3])
if type(rawEpoch) == "table" then return foreign(KEYS[3], rawEpoch) end
local epoch = 0
if rawEpoch then
  epoch = tonumber(rawEpoch)
  if epoch == nil then return foreign(KEYS[3], FOREIGN .. #rawEpoch .. " bytes)") end
end

if mode == "g" then
  -- Nothing to give back into when the state has expired (a fresh state already has it all), nor
  -- when the key was reset since the block was taken (the fresh state never counted its units).
  if not raw or tonumber(ARGV[10]) ~= epoch then return 0 end
  if kind ~= "b" then
    local start = tonumber(ARGV[9])
    if a == start and windowStart() == start then
      local nb = b - units
      if nb < 0 then nb = 0 end
      put(a, nb, start + W - now)
    end
    return 0
  end
  local elapsed = now - tonumber(ARGV[9])
  if elapsed < 0 then elapsed = 0 end
  local credit = units * W - elapsed * limit
  if credit <= 0 then return 0 end
  local nb = levelAt() - credit
  if nb < 0 then nb = 0 end
  local na = a
  if now > na then na = now end
  local behind = na - now
  put(na, nb, ceil(nb / limit) + behind)
  return 0
end

-- Take: count this instance among the key's lessees first.
local lk, horizon = KEYS[2], tonumber(ARGV[10])
-- The call's first write: on a foreign type it fails, and nothing is written.
local added = redis.pcall("ZADD", lk, now, ARGV[9])
if type(added) == "table" then return foreign(lk, added) end
redis.call("ZREMRANGEBYSCORE", lk, "-inf", now - horizon)
local lessees = redis.call("ZCARD", lk)
if horizon < minTtl then redis.call("PEXPIRE", lk, minTtl) else redis.call("PEXPIRE", lk, horizon) end
local fair = floor(capacity / (2 * lessees))
if fair < 1 then fair = 1 end
local ask = units
if fair < ask then ask = fair end

if kind ~= "b" then
  local start = windowStart()
  local count = 0
  if a == start then count = b end
  local endsIn = start + W - now
  local k = limit - count
  if ask < k then k = ask end
  if k > 0 then
    put(start, count + k, endsIn)
    return { k, endsIn, 0, endsIn, start, lessees, limit - count - k, epoch }
  end
  local left = limit - count
  if left < 0 then left = 0 end
  return { 0, endsIn, endsIn, endsIn, start, lessees, left, epoch }
end

local level = levelAt()
local behind = 0
if a > now then behind = a - now end
local full = capacity * W
local available = floor((full - level) / W)
local least = floor(fair / 2)
if units < least then least = units end
if least < 1 then least = 1 end
if available >= least then
  local k = available
  if ask < k then k = ask end
  local after = level + k * W
  local na = a
  if behind == 0 then na = now end
  local reset = ceil(after / limit) + behind
  put(na, after, reset)
  return { k, 0, 0, reset, now, lessees, available - k, epoch }
end
local left = available
if left < 0 then left = 0 end
return { 0, 0, ceil((level + least * W - full) / limit) + behind, ceil(level / limit) + behind, now, lessees, left, epoch }
