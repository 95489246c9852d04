--[[
instances.lua: the registry of live RedisStore instances that share a prefix, for the "degraded"
failure policy (each instance limits at limit / N while Redis is down, N = the live count).
KEYS[1]  the registry: a sorted set, member = instance id, score = when its entry expires
         (ms since the epoch, Redis's clock)
ARGV[1]  this instance's id (a random string)
ARGV[2]  ttlMs: integer ms an entry lives without a renewal (3 heartbeats)
ARGV[3]  "1": register or renew this instance; "0": remove it (the store is closing)
Reply    integer: the count of live entries after the change
The set itself expires ttlMs after the last write, so it leaves nothing behind.
]]
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ARGV[3] == "1" then
  redis.call("ZADD", KEYS[1], now + ttl, ARGV[1])
else
  redis.call("ZREM", KEYS[1], ARGV[1])
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
redis.call("PEXPIRE", KEYS[1], ttl)
return redis.call("ZCARD", KEYS[1])
