--[[
concurrency.lua: the leases of one key of a concurrency limit (ConcurrencyLimiter), in one atomic
call. It mirrors core/leases.ts (LeaseSet) operation for operation, so answers are identical to
MemoryStore's; the differential test (test/concurrency-redis.test.ts) holds the two together.
A lease is held while nowMs < its expiry; it expires leaseMs after its acquire or last renew, so
the slots of a holder that crashed come back without anyone releasing them.

KEYS[1]  the key's leases: a sorted set, member = lease id, score = when the lease expires
         (integer ms since the epoch, on the clock of ARGV[2]). A key without leases does not
         exist; the set expires when its last lease does (PEXPIRE), so it leaves nothing behind.
KEYS[2]  the key's tombstones (the same hash tag, so the same cluster slot): a sorted set, member =
         the id of a lease released while this set did not hold it, score = until when that
         release stands (nowMs + ARGV[5] of the release). Such a lease was granted by an instance
         that had lost Redis and released through another that had not; without the tombstone its
         hand-over ("d") or offline renew ("e") would hold its slot until it expires, for nobody.
         Expires with its latest tombstone (PEXPIRE); each new tombstone first drops past ones.
         Every mode takes both keys (the caller always sends them); only x, d and e read KEYS[2].
ARGV[1]  mode: "a" acquire (take a slot when fewer than limit are held; an id already held is
         renewed instead), "r" renew (extend a held lease), "x" release (remove it; an id not
         held is recorded in KEYS[2] for ARGV[5] ms when ARGV[5] > 0), "n" count,
         "d" hand over a lease granted while Redis did not answer (add it whatever the count, as
         its holder has it already; an id held keeps the later of the two expiries). "d" alone
         has no twin in core/leases.ts: only a store that can fail hands leases over.
         "e" a renew made while Redis did not answer: an id held is extended (to the later of
         the two expiries); one no longer held is taken again when fewer than limit are held.
         "d" and "e" of an id in KEYS[2] (released already) do nothing and answer ok = 1 (done).
ARGV[2]  nowMs: integer ms since the epoch, or "" for the server's clock (TIME)
ARGV[3]  limit: integer, the most leases held at once
ARGV[4]  lease id (a, r, x, d, e): a string unique over every process (the caller makes it)
ARGV[5]  leaseMs: integer ms a lease lives after its acquire or renew (a, r), or has left (d, e);
         for x, how long a release of an id not held stands (the releasing limiter's leaseMs, the
         longest a lease granted elsewhere can still live; 0: no tombstone)
ARGV[6]  minTtlMs: integer ms, the least PEXPIRE given to the set (0: exactly until its last lease expires)
Reply    4 integers: ok (1: acquired / renewed / released; 0: not, and always 0 for a count),
         remaining (slots free after the call), retryAfterMs (when every slot is held and the
         call was not a granted acquire: ms until the earliest lease expires; else 0),
         held (leases held after the call)
         A key holding a value the store did not write (a string, list or hash of another
         program's: WRONGTYPE): { "<key>: <error>" } (one string, the marker of
         stores/redis/foreign-value.ts), and nothing written: each key's first command fails
         before any write to it (only leases expired already may have been dropped from KEYS[1]
         when KEYS[2] is the foreign one). Another program's sorted set cannot be told from ours.
Cost: O(log n) per call for n leases held, plus the expired leases it drops (and, for a release
of an id not held, O(log m) for m tombstones plus the past ones it drops).
]]
local key = KEYS[1]
local mode = ARGV[1]
-- The caller's time, or Redis's own (TIME: seconds, microseconds) when it sends "". lease.lua
-- reads it in the same lines: each script is a file of its own, loaded and hashed alone.
local now
if ARGV[2] == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
end
local limit = tonumber(ARGV[3])
local id = ARGV[4]

-- A foreign value (see Reply): Redis's error `e` on key `at`. An error that is not WRONGTYPE (OOM,
-- READONLY...: Redis cannot serve) fails the call as before.
local function foreign(at, e)
  if not string.find(tostring(e.err), "^WRONGTYPE") then error(e) end
  return { at .. ": " .. e.err }
end

-- Expired leases (expiry <= now) go first: only live ones count.
local dropped = redis.pcall("ZREMRANGEBYSCORE", key, "-inf", now)
if type(dropped) == "table" then return foreign(key, dropped) end
local held = redis.call("ZCARD", key)
local ok = 0
local wrote = false
-- A hand-over or offline renew of a lease released already (see KEYS[2]).
local released = false
if mode == "d" or mode == "e" then
  local stands = redis.pcall("ZSCORE", KEYS[2], id)
  if type(stands) == "table" and stands.err then return foreign(KEYS[2], stands) end
  released = stands ~= false and tonumber(stands) > now
end
if mode == "a" then
  local has = redis.call("ZSCORE", key, id)
  if has or held < limit then
    redis.call("ZADD", key, now + tonumber(ARGV[5]), id)
    if not has then held = held + 1 end
    ok, wrote = 1, true
  end
elseif mode == "r" then
  if redis.call("ZSCORE", key, id) then
    redis.call("ZADD", key, now + tonumber(ARGV[5]), id)
    ok, wrote = 1, true
  end
elseif mode == "x" then
  ok = redis.call("ZREM", key, id)
  held = held - ok
  local standMs = tonumber(ARGV[5])
  if ok == 0 and standMs > 0 then
    local tombs = KEYS[2]
    local past = redis.pcall("ZREMRANGEBYSCORE", tombs, "-inf", now)
    if type(past) == "table" then return foreign(tombs, past) end
    redis.call("ZADD", tombs, now + standMs, id)
    if redis.call("PTTL", tombs) < standMs then redis.call("PEXPIRE", tombs, standMs) end
  end
elseif released then
  ok = 1 -- released already (through an instance that reached Redis): nothing to hand over, done
elseif mode == "d" then
  local has = redis.call("ZSCORE", key, id)
  local at = now + tonumber(ARGV[5])
  if not has then
    redis.call("ZADD", key, at, id)
    held = held + 1
  elseif tonumber(has) < at then
    redis.call("ZADD", key, at, id)
  end
  ok, wrote = 1, true
elseif mode == "e" then
  local has = redis.call("ZSCORE", key, id)
  local at = now + tonumber(ARGV[5])
  if has or held < limit then
    if not has then held = held + 1 end
    if not has or tonumber(has) < at then redis.call("ZADD", key, at, id) end
    ok, wrote = 1, true
  end
end

if wrote then
  -- The set lives until its latest lease expires (a renew on a clock that stepped back may not be the latest).
  local latest = redis.call("ZRANGE", key, -1, -1, "WITHSCORES")
  local ttl = tonumber(latest[2]) - now
  local minTtl = tonumber(ARGV[6])
  if ttl < minTtl then ttl = minTtl end
  if ttl < 1 then ttl = 1 end
  redis.call("PEXPIRE", key, ttl)
end

local remaining = limit - held
if remaining < 0 then remaining = 0 end
local retry = 0
if held >= limit and held > 0 and not ((mode == "a" or mode == "d" or mode == "e") and ok == 1) then
  local first = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
  retry = tonumber(first[2]) - now
end
return { ok, remaining, retry, held }
