-- bench/bitfield/run.sh: one bucket decision with a single BITFIELD inside the script (see
-- docs/benchmarks/redis.md); an experiment, not used by the store.
-- the BITFIELD route inside the script: one command reads and (when admitted) writes.
-- value: u16 epoch tag at bit 0, u48 V - e0*limit at bit 16 (virtual time x limit, GCRA form)
local limit, W, capacity, minTtl = 100, 60000, 100, 0
local key, now, cost = KEYS[1], tonumber(ARGV[1]), 1
local P = W
local e = math.floor(now / P)
local tag = e % 65535 + 1
local nowU = (now - e * P) * limit
local inc, full = cost * W, capacity * W
local K = 281474976710655 - (nowU + full - inc)
local r = redis.call("BITFIELD", key, "GET", "u16", 0, "GET", "u48", 16,
  "OVERFLOW", "SAT", "INCRBY", "u48", 16, -nowU, "INCRBY", "u48", 16, nowU,
  "OVERFLOW", "FAIL", "INCRBY", "u48", 16, K, "INCRBY", "u48", 16, inc - K)
if r[1] ~= tag then
  -- a new key, or one from an earlier epoch: rebase (once per key per epoch), with its TTL
  local old = 0
  if r[1] ~= 0 then
    local back = ((tag - r[1]) % 65535) * P * limit
    old = r[2] - back
    if old < nowU then old = nowU end
  else old = nowU end
  local nv = old + inc
  local ok = nv <= nowU + full
  if not ok then nv = old end
  redis.call("SET", key, struct.pack(">HI6", tag, nv), "PX", (e + 1) * P - now + math.ceil(full / limit) + minTtl)
  return {r[1], old, ok and 1 or 0}
end
local ok = r[6] ~= false
return {r[2], r[4], ok and 1 or 0}
