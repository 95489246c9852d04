// 100,000 keys inserted in order, then visited either in that order (as bench/memory.js visits
// them, which lets the CPU prefetch each key's objects) or in a stride (i * 7919 mod n, no order
// a prefetcher can follow, like real traffic): CPU ns per awaited call, median of five rounds of
// 2,000,000 calls, for ratekeeper's memory store (ALG: fixed-window by default, gcra, token-bucket,
// leaky-bucket, sliding-window with BUCKETS sub-windows, sliding-log) or for express-rate-limit's
// MemoryStore.increment.
// Usage: node bench/key-order.js <ours|erl> <seq|stride>   (ROOT=<checkout> to load another build)
// Ours: LIMIT (default 1e9) per WINDOW (default 1h; gcra gets burst LIMIT - 1), and FILL (default
// 0): units each key is charged first, in one call, as a heavy client leaves its bucket filled
// (e.g. ALG=token-bucket LIMIT=1000 FILL=600: a level above 596 units of 1,000 an hour was a
// number box in every key's state before the buckets' gcd units, docs/benchmarks/memory.md).
// For the table with every peer in the same process, use `bench/memory.js --scattered`; this file
// is the small A/B tool: one limiter per process, so two builds can be run alternately.
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);
const [who, order] = process.argv.slice(2);
const { RateLimiter, MemoryStore } = await import(
  `${process.env.ROOT ?? new URL("..", import.meta.url).pathname}/packages/ratekeeper/dist/index.js`
);
const { MemoryStore: Erl } = await import("express-rate-limit");
const n = 100000;
const keys = Array.from({ length: n }, (_, i) => `user:${i}:abc`);
let call;
if (who === "ours") {
  const limit = Number(process.env.LIMIT ?? 1e9);
  const window = process.env.WINDOW ?? "1h";
  const lim = new RateLimiter({
    limits: [
      {
        algorithm: process.env.ALG ?? "fixed-window",
        limit,
        window,
        ...(process.env.ALG === "gcra" ? { burst: limit - 1 } : {}),
        ...(process.env.BUCKETS === undefined ? {} : { buckets: Number(process.env.BUCKETS) }),
      },
    ],
    store: new MemoryStore(),
  });
  const fill = Number(process.env.FILL ?? 0);
  if (fill > 0) for (const k of keys) if (!(await lim.consume(k, fill)).allowed) throw new Error(`FILL=${fill} denied`);
  call = (k) => lim.consume(k);
} else {
  const s = new Erl();
  s.init({ windowMs: 3_600_000 });
  call = (k) => s.increment(k);
}
for (const k of keys) await call(k);
const idx = Int32Array.from({ length: n }, (_, i) => (order === "stride" ? (i * 7919) % n : i));
const out = [];
for (let r = 0; r < 7; r++) {
  const t = process.cpuUsage();
  for (let i = 0; i < 2_000_000; i++) await call(keys[idx[i % n]]);
  const u = process.cpuUsage(t);
  if (r >= 2) out.push(((u.user + u.system) * 1000) / 2e6);
}
out.sort((a, b) => a - b);
console.log(who, order, out[2].toFixed(0));
process.exit(0);
