import { RateLimiter, MemoryStore } from "ratekeeper";
const alg = process.argv[2] ?? "token-bucket";
const store = new MemoryStore({ sweepIntervalMs: 0 });
const lim = new RateLimiter({ algorithm: alg, limit: 1e9, window: "1m", store });
const N = 100_000;
const keys = Array.from({ length: N }, (_, i) => `user:${i}`);
for (const k of keys) await lim.consume(k);
let t0 = process.hrtime.bigint(), n = 0;
const end = Date.now() + 4000;
while (Date.now() < end) { for (let i = 0; i < N; i++) await lim.consume(keys[i]); n += N; }
console.log(alg, (n / (Number(process.hrtime.bigint() - t0) / 1e9) / 1e6).toFixed(2), "M/s");
