--[[
ratekeeper.lua: every algorithm of packages/ratekeeper/src/core/algorithms/, for one key and all
its limits, in one atomic call. Each function below mirrors its TypeScript twin operation for
operation (same integer arithmetic, same order), so decisions are bit-identical to MemoryStore;
the differential test (test/redis-differential.test.ts) holds the two together.
Lua numbers are IEEE doubles like JS numbers, so + - * / math.floor math.ceil agree to the bit.
Remainders: core/arith.ts mod(x, y) = x - floor(x / y) * y (fixed and sliding window) is
exactly Lua's `%` (Lua 5.1 defines a % b that way), so those are written `%` here; JS `%`
(sliding log, always on non-negative positions) is C fmod, written math.fmod.

One call runs D >= 1 decisions of one limiter (one policy of N limits), in order, each
atomic and all-or-nothing over its N limits; D > 1 only when the store batches (option `batch`).
KEYS[(d-1)*N + i]  state of limit i (1..N) of decision d (1..D). The keys of one decision share
          one hash tag (one Redis Cluster slot); a batch (D > 1) is only sent to a single Redis.
KEYS[D*N + j]  when N = 1, for the j-th reset ("x") of the call: that key's reset epoch,
          <its state key>:e, same hash tag (quota leasing, lease.lua KEYS[3]; see "x" below).
ARGV[1]   minTtlMs: integer ms, the least PEXPIRE given to a written key (0: exactly resetAfterMs)
ARGV[2]   N: limits per decision
ARGV[3..] per limit i, 8 entries from 3 + (i-1)*8 (ResolvedLimit in core/options.ts):
          algorithmId (index in ALGORITHMS: 0 fixed-window, 1 sliding-log, 2 sliding-window,
          3 token-bucket, 4 leaky-bucket, 5 gcra), limit (units), windowMs (ms),
          capacity (units), buckets (sub-windows), weighted (0/1), alignFirst (0/1; 2: clock-
          aligned, stored in the counter layout of stores/redis/counter.ts), shape (0/1)
then per decision d, E entries from 3 + 8N + (d-1)*E, E = 4 when a limit shapes (shape 1), else 3:
          mode: "c" consume (check every limit; if all admit, charge all), "p" peek (no
          writes), "r" refund (give back cost on every limit whose key still exists; keeps the
          TTLs), "x" reset (delete the keys, and, for a one-limit policy that can lease,
          raise the key's reset epoch: see "x" below; in the script so that it keeps its
          place in a batch); nowMs: integer ms since the epoch, or "" for the server clock (TIME, read once
          per call); cost: integer cost units, 1 <= cost <= the smallest capacity
          (The store sends Redis's time as nowMs: a clock it keeps calibrated against TIME, see
          server-clock.ts; "" only for the call that takes a new reading.)
          E = 4 only: maxDelayMs: integer ms, the longest the caller will hold the request, or ""
          for no bound; a shaping limit whose wait is longer denies (see bucket.ts decide()).
(One decision on one two-number limit may instead take the fast path, with its own compact
ARGV: see "fast path" below.)
Reply     5*N integers per decision, per limit in order: allowed (0/1), remaining (units),
          retryAfterMs (ms), resetAfterMs (ms), delayMs (ms); all 0 for a refund or a reset.
          When the call read TIME, one more integer at the end: that reading in microseconds
          since the epoch (the store calibrates its clock with it).
          A decision on a key holding a value the store did not write replies instead a string
          "<key>: <error>" where its first integer would be, then 5*N-1 zeros (keyFault below);
          it wrote nothing, and the call's other decisions are decided as usual.

State, one string per limit (LimitState {a, b, ring} of core/algorithms/types.ts):
- fixed-window, token/leaky bucket, gcra: a, b (a clock-aligned fixed window whose numbers fit:
  one integer instead, see "counter layout" below).
- sliding-window: a, then ring[0..buckets] (buckets+1 counts).
  These numbers are stored as 6-byte integers (struct "i6") when every one of them is a whole
  number in [0, 2^47) (ms timestamps until the year 6429, counts, levels), else as 8-byte
  doubles: a key's value is then 12 bytes, which keeps a bucket or counter key under 100 bytes
  of Redis memory (MEMORY USAGE). The length tells the two encodings apart.
- sliding-log: header "<ddd" = n (= a, units admitted less those refunded), h (search hint: a
  position whose predecessors were all outside the window at the last commit), high (the newest
  time a unit was logged at; a refund does not move it back; while n > 0 a decision is made as
  at max(now, high), see sliding-log.ts); then ring slot j (timestamp of unit p, j = p mod limit)
  at byte 24 + 8*j. (The memory store's ring may hold fewer slots; decisions are the same.) Only the slots a
  decision needs are read (GETRANGE) and written (SETRANGE): no sorted set, O(1) calls in the
  steady state, O(log limit) at worst. (A lone decision takes the fast path instead, in the same
  layout: the whole value read and rewritten up to 128 slots, ranges beyond.)
A key that does not exist is the fresh state (a = 0, b = 0, empty ring).
Built per limiter (scripts.ts): only the "@if <section>" ... "@end" blocks below for its
algorithms are kept, since Lua creates every `local function` closure on every call.
Every write sets PEXPIRE = max(resetAfterMs, minTtlMs, 1): the state equals a fresh one after it.
]]

-- The fixed window's counter layout (stores/redis/counter.ts: COUNTER_SPAN, COUNTER_TAGS,
-- COUNTER_HALF): value = tag * C_SPAN + count; tag differences 1..C_HALF are later windows. Used by
-- the fast path and by the general code below.
local C_SPAN, C_TAGS, C_HALF = 549755813888, 16383, 8191

-- A key holding a value the store did not write (another program's list or hash under a key name
-- of ours: WRONGTYPE; a string in no layout of ours: the checks below, FOREIGN) fails only the
-- decision on it: each decision of a batch runs under pcall, and keyFault turns its error into
-- the message of the reply's marker (the key, then the error). Every check and every error such
-- a value can cause comes before the decision's first write, so that decision writes nothing
-- (none of its limits) and the others of the call are decided as if it were not there. Errors
-- that say Redis cannot serve (OOM, READONLY...: neither WRONGTYPE, "ERR ..." nor the script's
-- own) are raised again: the whole call fails, as before.
-- (Made only for the calls that can use it: Lua makes a local function's closure on every call,
-- and a lone fast-path decision, the commonest call, cannot.)
-- (ARGV[1]: the fast path's mode letter, or the general layout's minTtlMs; read once, as ARGV
-- is a global, about 20 ns a lookup.)
local ARG1 = ARGV[1]
local keyFault
if ARG1 ~= "C" and ARG1 ~= "P" then
  keyFault = function(key, e)
    local m = e
    if type(e) == "table" then m = e.err end
    m = tostring(m)
    -- As client.ts isKeyValueError: an error that says Redis cannot serve, or refused the
    -- script, is never about the key (%f: whole words). The lists are client.ts's CANNOT_SERVE
    -- and SCRIPT_REFUSED (redis-foreign-batch.test.ts holds them equal); made only on this path.
    local CANNOT_SERVE = { "OOM", "BUSY", "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MISCONF", "NOREPLICAS", "NOPERM", "NOAUTH", "WRONGPASS", "MOVED", "ASK", "CROSSSLOT", "NOSCRIPT" }
    local SCRIPT_REFUSED = { "The user executing the script", "Script killed", "cluster is down", "non local key" }
    for _, code in ipairs(CANNOT_SERVE) do
      if string.find(m, "%f[%w]" .. code .. "%f[%W]") then error(e) end
    end
    for _, text in ipairs(SCRIPT_REFUSED) do
      if string.find(m, text, 1, true) then error(e) end
    end
    if not (string.find(m, "^WRONGTYPE") or string.find(m, "^ERR ") or string.find(m, "user_script:%d")) then error(e) end
    return key .. ": " .. m
  end
end
-- The error of a string in no layout of ours: error(FOREIGN .. <its length> .. " bytes)").
local FOREIGN = "a value the store did not write, in no layout of ratekeeper's ("
-- A sliding log's header (n, h, high) is one the store writes when n is a whole number in
-- [0, 2^53), h a whole number in [0, n], high finite (checked inline where a log is read, with
-- `% 1` and `high - high == 0`: math.floor and math.huge, global lookups, made it 95 ns, not 40).

--[[@if fast-pair]]
-- ---------------------------------------------------------------- fast path
-- One decision on one limit whose state is two numbers (fixed-window, token/leaky bucket, gcra),
-- a sliding window or a small sliding log, with the time given. Its own compact ARGV, told apart by ARGV[1] (a mode letter, where the
-- general layout has a number):
--   ARGV[1] "C" consume or "P" peek; ARGV[2] nowMs; ARGV[3] cost; with "s" only, ARGV[4]
--   maxDelayMs (integer ms, or "" for no bound). Or ARGV[1] "B": a batch of such decisions,
--   one key each (see "B" below), when the store batches.
-- The limit's constants are written into the script by the loader (the line marked
-- "@fast-consts": scripts.ts puts the limiter's values in place of its right-hand side, so each
-- such limiter has its own script and SHA); five arguments fewer per call cost Redis about 0.8 us
-- less CPU per decision and the client about 1 us (docs/benchmarks/redis.md). They are: limit;
-- W, windowMs; kind: "f" fixed-window (clock-aligned), "n" the same in the counter layout (one
-- INCRBY per decision in a window; replies with an integer), "F" fixed-window (first-request),
-- "b" bucket, "s" shaping bucket (leaky bucket, mode "shape"), "w" sliding window (weighted),
-- "v" sliding window (not weighted), "l" sliding log (limit <= 128), "L" sliding log (limit > 128;
-- both reply with numbers, not the state); capacity (units; for "w"/"v" the sub-window count);
-- minTtl, minTtlMs.
-- Decides and writes exactly as fixed-window.ts / bucket.ts decide() and the general code below,
-- but inline: no per-call closures or tables. It replies with the state it decided on: the key's
-- raw value before this call, or nil for a fresh key. The store computes the decision's numbers
-- from that state with the same TypeScript the memory store runs, so Redis builds no reply table
-- (a five-integer table reply costs about as much as the GET).
local fastMode = ARG1
if fastMode == "C" or fastMode == "P" or fastMode == "B" then
  local limit, W, kind, capacity, minTtl = 0, 1, "b", 0, 0 -- @fast-consts
  -- The long sliding log (kind "L"): LOG_K, the slots read with the header. logSlot(p): the time
  -- of position p, from that first read (logRaw) or a GETRANGE of up to 4 slots from p's
  -- (logBuf, from slot logB0; searches move forward from the hint).
  local LOG_K = 16
  local logKey, logRaw, logBuf, logB0
  local logSlot
  if kind == "L" then
    logSlot = function(p)
      local j = p % limit
      if j < LOG_K then return (struct.unpack("<d", logRaw, 25 + 8 * j)) end
      if logBuf == nil or j < logB0 or 8 * (j - logB0) + 8 > #logBuf then
        local c = limit - j
        if c > 4 then c = 4 end
        logBuf, logB0 = redis.call("GETRANGE", logKey, 24 + 8 * j, 23 + 8 * (j + c)), j
      end
      return (struct.unpack("<d", logBuf, 1 + 8 * (j - logB0)))
    end
  end
  -- One decision on `key`: consume (else peek) `cost` at `now`; maxDelayArg: ARGV text of the
  -- longest wait for a shaping bucket ("" or nil: no bound). Returns the state it decided on.
  local function one(key, now, cost, consume, maxDelayArg)
    if kind == "l" then
      -- sliding-log.ts check() and commit() on the whole value (limits up to 128 units: at most
      -- 1,048 bytes; larger ones are kind "L" below), in the general code's layout (header
      -- "<ddd" n, h, high; slot j at byte 24 + 8*j), so keys are shared with it both ways:
      -- one GET, one SET PX. The search for q (freeUnits) is slFirstInside's, from the hint.
      -- Replies with the numbers the store's logOutcome (sliding-log.ts) needs: the integer
      -- `free` for an admission at now (the common case), else {free, newest, decider}: for an
      -- admission made as at the high-water mark, {free, high, 0}; for a denial, the newest unit's
      -- time and the deciding unit's. (Larger values cost more this way than ranged reads and
      -- writes: 54 us against 15 at 1,000 units; likely the Lua garbage collector, whose work
      -- grows with the bytes each call allocates.) Inline, without "L"'s slot reader: a
      -- function call per slot read and a GETRANGE for the GET cost 1-1.6 us per decision more.
      local raw = redis.call("GET", key)
      local n, h, high = 0, 0, now
      if raw and (#raw < 24 or (#raw - 24) % 8 ~= 0) then error(FOREIGN .. #raw .. " bytes)") end
      if raw then
        n, h, high = struct.unpack("<ddd", raw)
        if not (n >= 0 and n < 9007199254740992 and n % 1 == 0 and h >= 0 and h <= n and h % 1 == 0 and high - high == 0) then
          error(FOREIGN .. #raw .. " bytes)")
        end
      else
        raw = ""
      end
      -- t: the time the decision is made as (an empty log, fresh or refunded to 0, decides at now).
      local t = now
      if n > 0 and high > now then t = high end
      local cutoff = t - W
      local lo, hi = n - limit, n
      if lo < 0 then lo = 0 end
      -- Position p's time is the double at byte 25 + 8 * (p % limit) (1-based for struct).
      if h > lo and h <= n then
        if struct.unpack("<d", raw, 25 + 8 * ((h - 1) % limit)) <= cutoff then lo = h else hi = h - 1 end
      end
      local step = 1
      while lo < hi do
        local p = lo + step - 1
        if p > hi - 1 then p = hi - 1 end
        if struct.unpack("<d", raw, 25 + 8 * (p % limit)) <= cutoff then
          lo = p + 1
          step = step * 2
        else
          hi = p
          break
        end
      end
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if struct.unpack("<d", raw, 25 + 8 * (mid % limit)) <= cutoff then lo = mid + 1 else hi = mid end
      end
      local free = lo - (n - limit)
      if free < cost then
        return {
          free,
          (struct.unpack("<d", raw, 25 + 8 * ((n - 1) % limit))),
          (struct.unpack("<d", raw, 25 + 8 * ((n - limit + cost - 1) % limit))),
        }
      end
      if consume then
        -- commit(): `cost` units at t from position n (slot s0), the ring wrapping at most once;
        -- the string grows by exact amounts until it holds `limit` slots.
        local cell = struct.pack("<d", t)
        local s0 = n % limit
        local e = s0 + cost
        local ttl = minTtl
        if t - now + W > ttl then ttl = t - now + W end
        if ttl < 1 then ttl = 1 end
        -- One concatenation each way (every Lua string made here is garbage the next GC step pays for).
        local head = struct.pack("<ddd", n + cost, lo, t)
        local v
        if e <= limit then
          v = head .. string.sub(raw, 25, 24 + 8 * s0) .. string.rep(cell, cost) .. string.sub(raw, 25 + 8 * e)
        else
          v = head .. string.rep(cell, e - limit) .. string.sub(raw, 25 + 8 * (e - limit), 24 + 8 * s0) .. string.rep(cell, limit - s0)
        end
        redis.call("SET", key, v, "PX", ttl)
      end
      if t > now then return { free, t, 0 } end
      return free
    end
    if kind == "L" then
      -- The sliding log of a limit above 128 (kind "l" above says why not whole): in the same
      -- layout, one GETRANGE reads the header and slots 0..15. A log of at most 16 slots is then
      -- all here: it is rewritten whole, at its exact size (one SET PX). A longer one is read
      -- and written by ranges as the general code does (logSlot; SETRANGE of the new units and
      -- of the header, one SETRANGE when they touch; PEXPIRE). Same search, same reply as "l".
      local raw = redis.call("GETRANGE", key, 0, 23 + 8 * LOG_K)
      local n, h, high = 0, 0, now
      if #raw > 0 and (#raw < 24 or (#raw - 24) % 8 ~= 0) then error(FOREIGN .. #raw .. " bytes)") end
      if #raw >= 24 then
        n, h, high = struct.unpack("<ddd", raw)
        if not (n >= 0 and n < 9007199254740992 and n % 1 == 0 and h >= 0 and h <= n and h % 1 == 0 and high - high == 0) then
          error(FOREIGN .. #raw .. " bytes)")
        end
      end
      -- t: the time the decision is made as (an empty log, fresh or refunded to 0, decides at now).
      local t = now
      if n > 0 and high > now then t = high end
      local m = n
      if m > limit then m = limit end
      logKey, logRaw, logBuf = key, raw, nil
      local cutoff = t - W
      local lo, hi = n - limit, n
      if lo < 0 then lo = 0 end
      if h > lo and h <= n then
        if logSlot(h - 1) <= cutoff then lo = h else hi = h - 1 end
      end
      local step = 1
      while lo < hi do
        local p = lo + step - 1
        if p > hi - 1 then p = hi - 1 end
        if logSlot(p) <= cutoff then
          lo = p + 1
          step = step * 2
        else
          hi = p
          break
        end
      end
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if logSlot(mid) <= cutoff then lo = mid + 1 else hi = mid end
      end
      local free = lo - (n - limit)
      if free < cost then return { free, logSlot(n - 1), logSlot(n - limit + cost - 1) } end
      if consume then
        -- commit(): `cost` units at t from position n (slot s0); the ring wraps at most once
        -- (cost <= limit).
        local cell = struct.pack("<d", t)
        local s0 = n % limit
        local e = s0 + cost
        local ttl = minTtl
        if t - now + W > ttl then ttl = t - now + W end
        if ttl < 1 then ttl = 1 end
        local head = struct.pack("<ddd", n + cost, lo, t)
        if m <= LOG_K then
          -- Whole, in one concatenation; slots past m (left by a refund) are dropped.
          local v
          if e <= limit then
            v = head .. string.sub(raw, 25, 24 + 8 * s0) .. string.rep(cell, cost) .. string.sub(raw, 25 + 8 * e, 24 + 8 * m)
          else
            v = head .. string.rep(cell, e - limit) .. string.sub(raw, 25 + 8 * (e - limit), 24 + 8 * s0) .. string.rep(cell, limit - s0)
          end
          redis.call("SET", key, v, "PX", ttl)
        else
          local first = cost
          if e > limit then first = limit - s0 end
          if s0 <= LOG_K then
            -- The header, slots 0..s0-1 as read, and the new units: one write.
            redis.call("SETRANGE", key, 0, head .. string.sub(raw, 25, 24 + 8 * s0) .. string.rep(cell, first))
          else
            redis.call("SETRANGE", key, 24 + 8 * s0, string.rep(cell, first))
            redis.call("SETRANGE", key, 0, head)
          end
          if cost > first then redis.call("SETRANGE", key, 24, string.rep(cell, cost - first)) end
          -- As the general code's slTrim: the ring just became full; rewrite it at its exact size.
          if n < limit and n + cost >= limit then redis.call("SET", key, redis.call("GET", key)) end
          redis.call("PEXPIRE", key, ttl)
        end
      end
      if t > now then return { free, t, 0 } end
      return free
    end
    if kind == "w" or kind == "v" then
      -- sliding-window.ts decide(), kind "w" weighted, "v" not; `capacity` is the sub-window
      -- count B. Only whether it admits, and the state it writes: the store computes the
      -- waits from the state replied (so no walk here). State: a, then B + 1 counts, as encode().
      local B = capacity
      local M = B + 1
      local raw = redis.call("GET", key)
      if B == 1 then
        -- The same with one sub-window (the default): the ring is two counts, kept in locals
        -- (no tables, no format strings built per call). ring[j % 2 + 1] is c1 for even j, c2 for odd.
        local a, c1, c2 = 0, 0, 0
        if raw then
          if #raw ~= 18 and #raw ~= 24 then error(FOREIGN .. #raw .. " bytes)") end
          if #raw == 18 then a, c1, c2 = struct.unpack("<i6i6i6", raw) else a, c1, c2 = struct.unpack("<ddd", raw) end
        end
        local atMs = now
        if a * W > atMs then atMs = a * W end
        local r = atMs % W
        local i = (atMs - r) / W
        -- countOf(j): the count of window j while a - 1 <= j <= a and j >= 0, else 0.
        local cur, prev = 0, 0
        if i <= a and i >= a - 1 and i >= 0 then
          if i % 2 == 0 then cur = c1 else cur = c2 end
        end
        if kind == "w" then
          local j = i - 1
          if j <= a and j >= a - 1 and j >= 0 then
            if j % 2 == 0 then prev = c1 else prev = c2 end
            prev = math.floor(prev * (W - r) / W)
          end
        end
        if consume and cur + prev + cost <= limit then
          local p = cost + cur
          local reset = W - r + atMs - now
          if kind == "w" then reset = reset + W - math.floor((W - 1) / p) end
          if i > a then
            if i - a >= 2 then
              c1, c2 = 0, 0
            elseif i % 2 == 0 then
              c1 = 0
            else
              c2 = 0
            end
            a = i
          end
          if i % 2 == 0 then c1 = c1 + cost else c2 = c2 + cost end
          local v
          if a >= 0 and a < 140737488355328 and math.floor(a) == a and c1 >= 0 and c1 < 140737488355328 and math.floor(c1) == c1
            and c2 >= 0 and c2 < 140737488355328 and math.floor(c2) == c2 then
            v = struct.pack("<i6i6i6", a, c1, c2)
          else
            v = struct.pack("<ddd", a, c1, c2)
          end
          local ttl = minTtl
          if reset > ttl then ttl = reset end
          if ttl < 1 then ttl = 1 end
          redis.call("SET", key, v, "PX", ttl)
        end
        return raw
      end
      local a, ring = 0, {}
      if raw then
        if #raw ~= 6 * (M + 1) and #raw ~= 8 * (M + 1) then error(FOREIGN .. #raw .. " bytes)") end
        local v
        if #raw == 6 * (M + 1) then
          v = { struct.unpack("<" .. string.rep("i6", M + 1), raw) }
        else
          v = { struct.unpack("<" .. string.rep("d", M + 1), raw) }
        end
        a = v[1]
        for j = 1, M do ring[j] = v[j + 1] end
      else
        for j = 1, M do ring[j] = 0 end
      end
      local S = W / B
      local atMs = now
      if a * S > atMs then atMs = a * S end
      local r = atMs % S
      local i = (atMs - r) / S
      -- countOf(j) is ring[j % M + 1] for a - B <= j <= a, j >= 0, else 0.
      local used = 0
      for j = i - B + 1, i do
        if j <= a and j >= a - B and j >= 0 then used = used + ring[j % M + 1] end
      end
      if kind == "w" then
        local j = i - B
        if j <= a and j >= a - B and j >= 0 then used = used + math.floor(ring[j % M + 1] * (S - r) / S) end
      end
      if consume and used + cost <= limit then
        -- resetAfterMs of the admission (sliding-window.ts), for the TTL.
        local p = cost
        if i <= a and i >= a - B and i >= 0 then p = p + ring[i % M + 1] end
        local reset = W - r + atMs - now
        if kind == "w" then reset = reset + S - math.floor((S - 1) / p) end
        -- advance(i), then count the cost in sub-window i
        if i > a then
          if i - a >= M then
            for j = 1, M do ring[j] = 0 end
          else
            for j = a + 1, i do ring[j % M + 1] = 0 end
          end
          a = i
        end
        ring[i % M + 1] = ring[i % M + 1] + cost
        local vals, whole = { a }, a >= 0 and a < 140737488355328 and math.floor(a) == a
        for j = 1, M do
          local c = ring[j]
          vals[j + 1] = c
          if not (c >= 0 and c < 140737488355328 and math.floor(c) == c) then whole = false end
        end
        local fmt = "d"
        if whole then fmt = "i6" end
        local ttl = minTtl
        if reset > ttl then ttl = reset end
        if ttl < 1 then ttl = 1 end
        redis.call("SET", key, struct.pack("<" .. string.rep(fmt, M + 1), unpack(vals)), "PX", ttl)
      end
      return raw
    end
    if kind == "n" then
      -- A clock-aligned fixed window in the counter layout (stores/redis/counter.ts): the value is
      -- tag * C_SPAN + count. Replies with the value the decision saw (the store reads the state
      -- from it with counterState), 0 for a fresh window.
      local w = (now - now % W) / W
      local here = w % C_TAGS + 1
      if not consume then
        local raw = redis.call("GET", key)
        local v = tonumber(raw or "0")
        -- Below C_SPAN (tag 0) but not 0: a number of another program's (ours carry a tag >= 1).
        if v == nil or (v ~= 0 and v < C_SPAN) then error(FOREIGN .. #raw .. " bytes)") end
        return v
      end
      -- One INCRBY decides when the key counts this window (or a later one, for a lagging clock).
      local n = redis.call("INCRBY", key, cost)
      local tag = math.floor(n / C_SPAN)
      if tag < 1 and n ~= cost then
        -- The key held a number below any of ours (tag 0, not 0, or negative): another program's
        -- counter. Give it back as it was (INCRBY kept its TTL) and write nothing else.
        redis.call("DECRBY", key, cost)
        error(FOREIGN .. "a number below any of ours)")
      end
      if tag >= 1 and (tag - here) % C_TAGS <= C_HALF then
        local count = n - tag * C_SPAN
        if count > limit then
          if count - cost < limit then
            -- Denied, but a smaller request could still fit: take this one back.
            redis.call("DECRBY", key, cost)
          elseif count >= C_SPAN / 2 then
            -- A flood of denials: fold the count back to "all spent" long before it reaches C_SPAN.
            redis.call("SET", key, string.format("%.0f", tag * C_SPAN + limit), "KEEPTTL")
          end
        end
        return n - cost
      end
      -- A fresh key, or one of a window that is over: this decision opens the window (cost <=
      -- limit, so it is admitted). The key lives minTtlMs past the window's end. Replies 0 for a
      -- key that did not exist (the fresh state: its window starts no earlier than 0, as in
      -- fixed-window.ts, which only matters for times before 1970), -1 for a window that is over.
      local start, reply = w * W, -1
      if tag == 0 then
        reply = 0
        if start < 0 then start = 0 end
      end
      redis.call("SET", key, string.format("%.0f", ((start / W) % C_TAGS + 1) * C_SPAN + cost), "PX", start + W - now + minTtl)
      return reply
    end
    local raw = redis.call("GET", key)
    local a, b = 0, 0
    if raw then
      if #raw ~= 12 and #raw ~= 16 then error(FOREIGN .. #raw .. " bytes)") end
      if #raw == 12 then a, b = struct.unpack("<i6i6", raw) else a, b = struct.unpack("<dd", raw) end
    end
    local ok, nb, resetMs
    if kind == "b" or kind == "s" then
      -- bucket.ts decide()
      local level
      local elapsed = now - a
      if elapsed <= 0 then
        level = b
      elseif elapsed >= math.ceil(b / limit) then
        level = 0
      else
        level = b - elapsed * limit
      end
      local behind = 0
      if a > now then behind = a - now else a = now end
      nb = level + cost * W
      ok = nb <= capacity * W
      if ok and kind == "s" then
        local maxDelay = tonumber(maxDelayArg)
        ok = maxDelay == nil or math.ceil(level / limit) + behind <= maxDelay
      end
      resetMs = math.ceil(nb / limit) + behind
    else
      -- fixed-window.ts decide()
      local start
      if kind == "F" then
        if b > 0 and now - a < W then start = a else start = now end
      else
        start = now - now % W
        if a > start then start = a end
      end
      local count = 0
      if a == start then count = b end
      ok = count + cost <= limit
      a, nb, resetMs = start, count + cost, start + W - now
    end
    if ok and consume then
      local v
      if a >= 0 and a < 140737488355328 and math.floor(a) == a and nb >= 0 and nb < 140737488355328 and math.floor(nb) == nb then
        v = struct.pack("<i6i6", a, nb)
      else
        v = struct.pack("<dd", a, nb)
      end
      local ttl = minTtl
      if resetMs > ttl then ttl = resetMs end
      if ttl < 1 then ttl = 1 end
      redis.call("SET", key, v, "PX", ttl)
    end
    return raw
  end
  if fastMode ~= "B" then return one(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), fastMode == "C", ARGV[4]) end
  -- "B": a batch of lone decisions, one per key, in order: ARGV[2 + E*(d-1) ..] for decision d
  -- is mode ("C"/"P"), nowMs, cost, and with "s" maxDelayMs (E = 4, else 3). Replies with the
  -- state each decided on (false for a fresh bucket key).
  local E = 3
  if kind == "s" then E = 4 end
  -- A decision on a foreign value (keyFault above) replies { "<key>: <error>" } in its place.
  -- The decisions from `from` on run under one pcall; one that fails is marked and the rest go
  -- on under a new one (a pcall per decision would cost about 22 ns more than a plain call).
  local states = {}
  local at = 0
  local function run(from)
    for d = from, #KEYS do
      at = d
      local o = 2 + E * (d - 1)
      local r = one(KEYS[d], tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), ARGV[o] == "C", ARGV[o + 3])
      if r == nil then r = false end
      states[d] = r
    end
  end
  local from = 1
  while from <= #KEYS do
    local ok, e = pcall(run, from)
    if ok then break end
    states[at] = { keyFault(KEYS[at], e) }
    from = at + 1
  end
  return states
end
--[[@end]]

-- The decision being made: the algorithms below read these (set for each decision of the call).
-- maxDelay: the caller's longest wait for shaping limits, nil for no bound.
local now, cost, maxDelay
local minTtl = tonumber(ARG1)
local fmod, floor, ceil, max, min = math.fmod, math.floor, math.ceil, math.max, math.min
local pack, unpack_ = struct.pack, struct.unpack

local function ttlOf(resetAfterMs)
  return max(resetAfterMs, minTtl, 1)
end

local I6_LIMIT = 140737488355328 -- 2^47: struct "i6" is signed


--[[@if pair]]
-- The two numbers a, b of fixed-window and bucket states: i6 i6 (12 bytes) when both fit.
local function decode2(raw)
  if #raw == 12 then return unpack_("<i6i6", raw) end
  return unpack_("<dd", raw)
end

local function encode2(a, b)
  if a >= 0 and a < I6_LIMIT and floor(a) == a and b >= 0 and b < I6_LIMIT and floor(b) == b then
    return pack("<i6i6", a, b)
  end
  return pack("<dd", a, b)
end
--[[@end]]

--[[@if fixed-window]]
-- ---------------------------------------------------------------- fixed-window.ts
local function fwStart(s, L)
  if L.alignFirst then
    if s.b > 0 and now - s.a < L.windowMs then return s.a end
    return now
  end
  -- A clock that stepped back into an earlier window still counts in the newest one seen.
  return max(now - now % L.windowMs, s.a)
end

local function fwCheck(s, L, out)
  local start = fwStart(s, L)
  local count = 0
  if s.a == start then count = s.b end
  local endsIn = start + L.windowMs - now
  if count + cost <= L.limit then
    out[1] = 1; out[2] = L.limit - count - cost; out[3] = 0; out[4] = endsIn
  else
    out[1] = 0; out[2] = L.limit - count; out[3] = endsIn; out[4] = endsIn
  end
  out[5] = 0
end

local function fwCommit(s, L)
  local start = fwStart(s, L)
  local count = 0
  if s.a == start then count = s.b end
  s.b = count + cost
  s.a = start
end

local function fwRefund(s, L)
  if s.a == fwStart(s, L) then s.b = max(0, s.b - cost) end
end

-- The counter layout of a clock-aligned fixed window (stores/redis/counter.ts): one integer,
-- tag * C_SPAN + count, tag = (window start / windowMs) mod C_TAGS + 1. A tag 0 to C_HALF windows
-- after the current one is the state (count capped at the limit: denials may have added to it);
-- any other tag is a window that is over (a = -inf: it counts nothing, the window is the clock's).
local function ctrDecode(s, L, raw)
  local v = tonumber(raw)
  -- Below C_SPAN (tag 0) but not 0: a number of another program's (ours carry a tag >= 1).
  if v == nil or (v ~= 0 and v < C_SPAN) then error(FOREIGN .. #raw .. " bytes)") end
  local tag = floor(v / C_SPAN)
  local W = L.windowMs
  local w = (now - now % W) / W
  if tag >= 1 and (tag - (w % C_TAGS + 1)) % C_TAGS <= C_HALF then
    s.a = (w + (tag - (w % C_TAGS + 1)) % C_TAGS) * W
    s.b = min(v - tag * C_SPAN, L.limit)
  else
    -- A window that is over: counts nothing now (a = -inf: the window is the clock's), and
    -- leaves nothing for a refund to write back.
    s.a = -math.huge
    s.exists = false
  end
end

local function ctrEncode(s, L)
  -- "%.0f": Redis would write a number argument with an exponent; these are integers < 2^53.
  return string.format("%.0f", ((s.a / L.windowMs) % C_TAGS + 1) * C_SPAN + s.b)
end

--[[@end]]

--[[@if bucket]]
-- ---------------------------------------------------------------- bucket.ts
local function levelAt(s, L)
  local elapsed = now - s.a
  if elapsed <= 0 then return s.b end
  if elapsed >= ceil(s.b / L.limit) then return 0 end
  return s.b - elapsed * L.limit
end

local function bkCheck(s, L, out)
  local level = levelAt(s, L)
  -- A clock that stepped back: waits count from this earlier reading.
  local behind = 0
  if s.a > now then behind = s.a - now end
  local full = L.capacity * L.windowMs
  local after = level + cost * L.windowMs
  local delay = 0
  if L.shape then delay = ceil(level / L.limit) + behind end
  local over = 0
  if maxDelay then over = delay - maxDelay end
  if after <= full and over <= 0 then
    out[1] = 1
    out[2] = floor((full - after) / L.windowMs)
    out[3] = 0
    out[4] = ceil(after / L.limit) + behind
    out[5] = delay
  else
    out[1] = 0
    out[2] = floor((full - level) / L.windowMs)
    local wait = 0
    if after > full then wait = ceil((after - full) / L.limit) + behind end
    out[3] = max(wait, over)
    out[4] = ceil(level / L.limit) + behind
    out[5] = 0
  end
end

local function bkCommit(s, L)
  s.b = levelAt(s, L) + cost * L.windowMs
  s.a = max(now, s.a)
end

local function bkRefund(s, L)
  s.b = max(0, levelAt(s, L) - cost * L.windowMs)
  s.a = max(now, s.a)
end

--[[@end]]

--[[@if sliding-window]]
-- ---------------------------------------------------------------- sliding-window.ts
-- Packs the numbers of `vals` (a Lua array) as i6 when all fit, else as doubles.
local function encode(vals)
  local n = #vals
  for k = 1, n do
    local v = vals[k]
    if not (v >= 0 and v < I6_LIMIT and floor(v) == v) then
      return pack("<" .. string.rep("d", n), unpack(vals))
    end
  end
  return pack("<" .. string.rep("i6", n), unpack(vals))
end

-- Unpacks `n` numbers written by encode() (the trailing position struct.unpack adds is ignored).
local function decode(raw, n)
  if #raw == 6 * n then return { unpack_("<" .. string.rep("i6", n), raw) } end
  return { unpack_("<" .. string.rep("d", n), raw) }
end

-- s.ring is 1-based here: TS ring[j] is s.ring[j + 1].
local function countOf(s, L, j)
  if j <= s.a and j >= s.a - L.buckets and j >= 0 then
    return s.ring[j % (L.buckets + 1) + 1]
  end
  return 0
end

local function usedAt(s, L, i, r, extra)
  local B = L.buckets
  local used = extra
  for j = i - B + 1, i do used = used + countOf(s, L, j) end
  if L.weighted then
    local S = L.windowMs / B
    used = used + floor(countOf(s, L, i - B) * (S - r) / S)
  end
  return used
end

local function waitMs(s, L, i, r, c, extra)
  local B = L.buckets
  local S = L.windowMs / B
  local full = extra
  for j = i - B + 1, i do full = full + countOf(s, L, j) end
  for k = 0, B + 1 do
    local cur = i + k
    if k > 0 then
      local leaving = cur - B
      local x = 0
      if leaving == i then x = extra end
      full = full - (countOf(s, L, leaving) + x)
    end
    local need = L.limit - c - full
    if need >= 0 then
      local from = 0
      if k == 0 then from = r end
      local partial = 0
      if L.weighted then
        partial = countOf(s, L, cur - B)
        if cur - B == i then partial = partial + extra end
      end
      if partial == 0 then return cur * S + from - (i * S + r) end
      local x = max(from, S - floor(((need + 1) * S - 1) / partial))
      if x < S then return cur * S + x - (i * S + r) end
    end
  end
  return (B + 1) * S - r
end

local function swCheck(s, L, out)
  local S = L.windowMs / L.buckets
  -- A clock that stepped back before the newest sub-window: decide as at that sub-window's start.
  local atMs = max(now, s.a * S)
  local behind = atMs - now
  local r = atMs % S
  local i = (atMs - r) / S
  local used = usedAt(s, L, i, r, 0)
  out[5] = 0
  if used + cost <= L.limit then
    out[1] = 1
    out[2] = L.limit - used - cost
    out[3] = 0
    out[4] = waitMs(s, L, i, r, L.limit, cost) + behind
  else
    out[1] = 0
    out[2] = max(0, L.limit - used)
    out[3] = waitMs(s, L, i, r, cost, 0) + behind
    out[4] = waitMs(s, L, i, r, L.limit, 0) + behind
  end
end

local function swCommit(s, L)
  local S = L.windowMs / L.buckets
  local i = max((now - now % S) / S, s.a)
  -- advance(s, lim, i)
  if i > s.a then
    local M = L.buckets + 1
    if i - s.a >= M then
      for j = 1, M do s.ring[j] = 0 end
    else
      for j = s.a + 1, i do s.ring[j % M + 1] = 0 end
    end
    s.a = i
  end
  local slot = i % (L.buckets + 1) + 1
  s.ring[slot] = s.ring[slot] + cost
end

local function swRefund(s, L)
  local S = L.windowMs / L.buckets
  local i = max((now - now % S) / S, s.a)
  local M = L.buckets + 1
  local left = cost
  local j = s.a
  while left > 0 and j > s.a - M and j >= i - L.buckets do
    local slot = j % M + 1
    local take = min(left, s.ring[slot])
    s.ring[slot] = s.ring[slot] - take
    left = left - take
    j = j - 1
  end
end

--[[@end]]

--[[@if sliding-log]]
-- ---------------------------------------------------------------- sliding-log.ts
-- Positions are unit numbers p; slot p mod limit lives at byte 24 + 8 * slot. s.cache holds the
-- slots read or written by this call (by slot, so two positions sharing a slot never disagree).
local slPrefetch
local function slRead(s, L, p)
  local slot = fmod(p, L.limit)
  local v = s.cache[slot]
  if v == nil then
    -- Searches move forward from here: fetch the next few slots in the same call.
    slPrefetch(s, L, p, 4)
    v = s.cache[slot]
  end
  return v
end

-- Reads up to `count` consecutive positions from p with one GETRANGE (stops at the ring's end
-- and at position n): in steady traffic the edge of the window is within a few slots of the hint.
slPrefetch = function(s, L, p, count)
  local slot = fmod(p, L.limit)
  count = max(1, min(count, L.limit - slot, s.a - p))
  if s.cache[slot] ~= nil then return end
  local off = 24 + 8 * slot
  local v = { unpack_("<" .. string.rep("d", count), redis.call("GETRANGE", s.key, off, off + 8 * count - 1)) }
  for k = 1, count do s.cache[slot + k - 1] = v[k] end
end

-- While the ring fills up (n < limit), SETRANGE grows the string and Redis over-allocates it
-- (an sds buffer doubles); when the ring becomes full, it is rewritten once at its exact size
-- (24 + 8 * limit bytes), so a full ring never carries slack. Keys that never fill keep at most
-- twice their small size.
local function slTrim(s)
  redis.call("SET", s.key, redis.call("GET", s.key))
end

-- freeUnits(): the first position q in [max(0, n-L), n) whose unit is inside the window (or n);
-- the ring is sorted, so q is unique whatever the search path. Starts from the hint h.
local function slFirstInside(s, L, cutoff)
  local n, Lim = s.a, L.limit
  local lo = max(0, n - Lim)
  local hi = n
  local h = s.h
  if h > lo and h <= n then
    slPrefetch(s, L, h - 1, 4)
    if slRead(s, L, h - 1) <= cutoff then lo = h else hi = h - 1 end
  end
  -- Gallop from lo (steady traffic: q is at or next to the hint), then bisect.
  local step = 1
  while lo < hi do
    local p = min(lo + step - 1, hi - 1)
    if slRead(s, L, p) <= cutoff then
      lo = p + 1
      step = step * 2
    else
      hi = p
      break
    end
  end
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if slRead(s, L, mid) <= cutoff then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- The time a decision is made as: the high-water mark when the clock is behind it and the log
-- holds units (see sliding-log.ts), else now. commit logs the units at this time.
local function slTime(s)
  if s.a > 0 and s.high > now then return s.high end
  return now
end

local function slCheck(s, L, out)
  local Lim = L.limit
  local t = slTime(s)
  local q = slFirstInside(s, L, t - L.windowMs)
  s.q = q
  local free = q - (s.a - Lim)
  out[5] = 0
  if free >= cost then
    -- The units logged now (at t) are the last to leave.
    out[1] = 1; out[2] = free - cost; out[3] = 0; out[4] = t - now + L.windowMs
    return
  end
  local decider = slRead(s, L, s.a - Lim + cost - 1)
  out[1] = 0
  out[2] = free
  out[3] = decider + L.windowMs - now
  out[4] = slRead(s, L, s.a - 1) + L.windowMs - now
end

-- Writes vals[1..] at positions p, p+1, ...: at most two SETRANGEs (the ring wraps once at most).
local function slWriteVals(s, L, p, vals)
  local Lim = L.limit
  local count = #vals
  local slot = fmod(p, Lim)
  local first = min(count, Lim - slot)
  local parts = {}
  for k = 1, count do
    parts[k] = pack("<d", vals[k])
    s.cache[fmod(p + k - 1, Lim)] = vals[k]
  end
  redis.call("SETRANGE", s.key, 24 + 8 * slot, table.concat(parts, "", 1, first))
  if count > first then redis.call("SETRANGE", s.key, 24, table.concat(parts, "", first + 1, count)) end
end

-- Writes `count` copies of t at positions p .. p+count-1 (a commit: all units logged at t).
local function slWriteRun(s, L, p, count, t)
  local Lim = L.limit
  local slot = fmod(p, Lim)
  local first = min(count, Lim - slot)
  local cell = pack("<d", t)
  redis.call("SETRANGE", s.key, 24 + 8 * slot, string.rep(cell, first))
  if count > first then redis.call("SETRANGE", s.key, 24, string.rep(cell, count - first)) end
  for k = 0, count - 1 do s.cache[fmod(p + k, Lim)] = t end
end

local function slCommit(s, L)
  local t = slTime(s)
  slWriteRun(s, L, s.a, cost, t)
  local filled = s.a < L.limit and s.a + cost >= L.limit
  s.a = s.a + cost
  s.h = s.q
  s.high = t
  s.trim = filled
end

local function slRefund(s, L)
  local Lim, W = L.limit, L.windowMs
  local c = min(cost, s.a, Lim)
  if c == 0 then return false end
  local n = s.a - c
  -- The refunded units' slots stand again for units n-L+i, restored as
  -- min(time of unit n+i - windowMs, oldest unit still known) (see sliding-log.ts). Only i with
  -- p = n-L+i >= 0 are written; oldestKnown is read only then (its slot is written by then).
  local i0 = max(0, Lim - n)
  -- Only read here: save() writes them (s.vals from position s.valsAt), after every limit's
  -- refund was worked out (see "r" below).
  if i0 < c then
    local oldestKnown = math.huge
    if c < Lim then oldestKnown = slRead(s, L, n + c) end
    local vals = {}
    for i = i0, c - 1 do vals[#vals + 1] = min(slRead(s, L, n + i) - W, oldestKnown) end
    s.vals, s.valsAt = vals, n - Lim + i0
  end
  -- The high-water mark stays: units that left the window stay outside it.
  s.a = n
  s.h = 0
  return true
end

--[[@end]]

-- ---------------------------------------------------------------- load / store
-- (Branches for algorithms whose section was left out of this build of the script never run.)
local N = tonumber(ARGV[2])
local limits = {}
local E = 3
for i = 1, N do
  local o = 3 + (i - 1) * 8
  limits[i] = {
    alg = tonumber(ARGV[o]),
    limit = tonumber(ARGV[o + 1]),
    windowMs = tonumber(ARGV[o + 2]),
    capacity = tonumber(ARGV[o + 3]),
    buckets = tonumber(ARGV[o + 4]),
    weighted = ARGV[o + 5] == "1",
    alignFirst = ARGV[o + 6] == "1",
    counter = ARGV[o + 6] == "2",
    shape = ARGV[o + 7] == "1",
  }
  if limits[i].shape then E = 4 end
end

local function load(key, L)
  local s = { key = key, a = 0, b = 0, exists = false }
  if L.alg == 1 then
    local head = redis.call("GETRANGE", key, 0, 23)
    s.cache = {}
    s.h = 0
    s.high = 0
    if #head == 24 then
      s.exists = true
      s.a, s.h, s.high = unpack_("<ddd", head)
      local n, h, high = s.a, s.h, s.high
      if not (n >= 0 and n < 9007199254740992 and n % 1 == 0 and h >= 0 and h <= n and h % 1 == 0 and high - high == 0) then
        error(FOREIGN .. "24 bytes)")
      end
    elseif #head > 0 then
      error(FOREIGN .. #head .. " bytes)")
    end
  else
    local raw = redis.call("GET", key)
    if L.alg == 2 then
      local M = L.buckets + 1
      s.ring = {}
      if raw then
        if #raw ~= 6 * (M + 1) and #raw ~= 8 * (M + 1) then error(FOREIGN .. #raw .. " bytes)") end
        s.exists = true
        local v = decode(raw, M + 1)
        s.a = v[1]
        for j = 1, M do s.ring[j] = v[j + 1] end
      else
        for j = 1, M do s.ring[j] = 0 end
      end
    elseif raw then
      s.exists = true
      if L.counter then
        ctrDecode(s, L, raw)
      else
        if #raw ~= 12 and #raw ~= 16 then error(FOREIGN .. #raw .. " bytes)") end
        s.a, s.b = decode2(raw)
      end
    end
  end
  return s
end

local function save(s, L, ttlMs)
  -- ttlMs == nil: keep the key's TTL (refund never lengthens how long the state matters).
  if L.alg == 1 then
    if s.vals then slWriteVals(s, L, s.valsAt, s.vals) end -- a refund's (slRefund)
    redis.call("SETRANGE", s.key, 0, pack("<ddd", s.a, s.h, s.high))
    if s.trim then slTrim(s) end
    if ttlMs then redis.call("PEXPIRE", s.key, ttlMs) end
    return
  end
  local val
  if L.alg == 2 then
    local vals = { s.a }
    for j = 1, L.buckets + 1 do vals[j + 1] = s.ring[j] end
    val = encode(vals)
  elseif L.counter then
    val = ctrEncode(s, L)
    -- A counter key lives minTtlMs past its window's end (the fast path sets it once per window).
    if ttlMs then ttlMs = max(s.a + L.windowMs - now + minTtl, 1) end
  else
    val = encode2(s.a, s.b)
  end
  if ttlMs then
    redis.call("SET", s.key, val, "PX", ttlMs)
  else
    redis.call("SET", s.key, val, "KEEPTTL")
  end
end

local base = 3 + 8 * N
local D = (#ARGV - base + 1) / E
local serverNow, serverUs
-- Preallocated for one decision of one limit (growing a table field by field reallocates it).
local reply = { 0, 0, 0, 0, 0 }
local out = { 0, 0, 0, 0, 0 }
local states = {}
-- Resets met so far in this call: the epoch key of the j-th is KEYS[D * N + j] (N = 1).
local resets = 0
-- One decision (d from 0), run under pcall (below): `at` is the key it is touching, for the marker of a
-- foreign value (keyFault): reply[o + 1] is then "<key>: <error>" (a string where an integer is
-- otherwise), the rest of its 5 * N entries 0. Loads and checks (every read) come before the
-- first write of a decision, so a foreign value fails it before it charges any of its limits.
local at
local function decide(d)
  at = KEYS[d * N + 1]
  local mode = ARGV[base + E * d]
  local nowArg = ARGV[base + E * d + 1]
  if nowArg == "" then
    if serverNow == nil then
      -- Server time, so app servers with skewed clocks agree. Writing after TIME needs effects
      -- replication, the default since Redis 5 (the store needs 6.0+ anyway, for SET KEEPTTL).
      local t = redis.call("TIME")
      serverNow = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
      serverUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    now = serverNow
  else
    now = tonumber(nowArg)
  end
  cost = tonumber(ARGV[base + E * d + 2])
  if E == 4 then maxDelay = tonumber(ARGV[base + E * d + 3]) end
  local o = d * 5 * N
  if mode == "x" then
    -- A reset of a one-limit policy that quota leasing can use (fixed window, buckets but a
    -- shaping one) raises the key's reset epoch (its KEYS entry after the state keys, see the
    -- header): lease.lua gives nothing back for blocks taken in an earlier epoch (their units
    -- were counted in the state deleted here), and tells the instances holding them. The new
    -- epoch is max(old + 1, now), so an epoch key that expired and is made again does not come
    -- back to a value a live block holds (short of Redis's clock stepping back that far). It
    -- lives twice as long as the state can matter, a window or the time a full bucket takes to
    -- drain: past that, giving back an old block credits nothing.
    -- The epoch key is read (and a foreign value in it refused) before anything is written: a
    -- reset fails whole or is applied whole.
    local L = limits[1]
    if N == 1 then resets = resets + 1 end
    local ek, e
    if N == 1 and not L.shape and L.alg ~= 1 and L.alg ~= 2 then
      ek = KEYS[D * N + resets]
      -- (Never from the store, which always sends it: a decision failing alone says so.)
      if ek == nil then error("a reset without its epoch key") end
      at = ek
      local raw = redis.call("GET", ek)
      e = tonumber(raw or "0")
      if e == nil then error(FOREIGN .. #raw .. " bytes)") end
      e = e + 1
      if now > e then e = now end
    end
    for i = 1, N do redis.call("DEL", KEYS[d * N + i]) end
    if ek then
      local span = L.windowMs
      if L.alg ~= 0 then span = max(span, ceil(L.capacity * L.windowMs / L.limit)) end
      redis.call("SET", ek, string.format("%.0f", e), "PX", max(2 * span, minTtl, 1))
    end
    for k = 1, 5 * N do reply[o + k] = 0 end
  else
    for i = 1, N do
      at = KEYS[d * N + i]
      states[i] = load(at, limits[i])
    end
  end

  if mode == "x" then
    -- done above
  elseif mode == "r" then
    -- Every limit's refund is worked out (a sliding log's slots read) before the first write: a
    -- value that fails one (a log whose slots are not there) fails the refund whole, no limit
    -- given back alone.
    for i = 1, N do
      local s, L = states[i], limits[i]
      at = s.key
      if s.exists then
        local alg = L.alg
        if alg == 0 then fwRefund(s, L)
        elseif alg == 1 then s.exists = slRefund(s, L) -- false: nothing to give back, nothing written
        elseif alg == 2 then swRefund(s, L)
        else bkRefund(s, L) end
      end
    end
    for i = 1, N do
      if states[i].exists then save(states[i], limits[i], nil) end
    end
    for k = 1, 5 * N do reply[o + k] = 0 end
  else
    local allowed = true
    for i = 1, N do
      local s, L = states[i], limits[i]
      local alg = L.alg
      at = s.key
      if alg == 0 then fwCheck(s, L, out)
      elseif alg == 1 then slCheck(s, L, out)
      elseif alg == 2 then swCheck(s, L, out)
      else bkCheck(s, L, out) end
      if out[1] == 0 then allowed = false end
      s.resetAfterMs = out[4]
      local oi = o + (i - 1) * 5
      for k = 1, 5 do reply[oi + k] = out[k] end
    end
    if allowed and mode == "c" then
      for i = 1, N do
        local s, L = states[i], limits[i]
        local alg = L.alg
        if alg == 0 then fwCommit(s, L)
        elseif alg == 1 then slCommit(s, L)
        elseif alg == 2 then swCommit(s, L)
        else bkCommit(s, L) end
        save(s, L, ttlOf(s.resetAfterMs))
      end
    end
  end
end

-- The decisions from `from` on, under one pcall; after a failed one the rest go on under a new one.
local failed = 0
local function run(from)
  for d = from, D - 1 do
    failed = d
    decide(d)
  end
end
local from = 0
while from < D do
  local ok, e = pcall(run, from)
  if ok then break end
  local o = failed * 5 * N
  reply[o + 1] = keyFault(at, e)
  for k = 2, 5 * N do reply[o + k] = 0 end
  from = failed + 1
end

if serverUs then reply[D * 5 * N + 1] = serverUs end
return reply
