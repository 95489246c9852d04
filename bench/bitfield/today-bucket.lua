-- bench/bitfield/run.sh: the token-bucket branch ("b") of the fast path in
-- packages/ratekeeper/src/stores/redis/scripts/ratekeeper.lua, with its constants written in.
-- today's fast path, kind "b" (token bucket): GET, decide, SET PX when admitted
local limit, W, capacity, minTtl = 100, 60000, 100, 0
local key, now, cost = KEYS[1], tonumber(ARGV[1]), 1
local raw = redis.call("GET", key)
local a, b = 0, 0
if raw then
  if #raw == 12 then a, b = struct.unpack("<i6i6", raw) else a, b = struct.unpack("<dd", raw) end
end
local level
local elapsed = now - a
if elapsed <= 0 then level = b elseif elapsed >= math.ceil(b / limit) then level = 0 else level = b - elapsed * limit end
local behind = 0
if a > now then behind = a - now else a = now end
local nb = level + cost * W
local ok = nb <= capacity * W
local resetMs = math.ceil(nb / limit) + behind
if ok then
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
