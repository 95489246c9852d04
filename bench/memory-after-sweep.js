// What a MemoryStore holds after a flood of distinct keys has been swept: heap used + array
// buffers after gc, at the start, after N fresh keys, and after a sweep that drops them all.
// The store's estimate (`store.bytes`) goes to 0 with the keys; this shows whether the process's
// memory follows (KeyIndex.compact, docs/security.md).
//
// Usage: node --expose-gc bench/memory-after-sweep.js [algorithm ...] [--keys N]
//        (default: fixed-window, sliding-window with 10 sub-windows, sliding-log; 500,000 keys)

import { MemoryStore, RateLimiter } from "ratekeeper";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);
if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc");

const args = process.argv.slice(2);
const at = args.indexOf("--keys");
const N = at >= 0 ? Number(args.splice(at, 2)[1]) : 500_000;
const algorithms = args.length > 0 ? args : ["fixed-window", "sliding-window", "sliding-log"];

const mb = () => {
  globalThis.gc();
  globalThis.gc();
  const m = process.memoryUsage();
  return (m.heapUsed + m.arrayBuffers) / 1e6;
};

for (const algorithm of algorithms) {
  let now = 1_700_000_040_000;
  const store = new MemoryStore({ sweepIntervalMs: 0 });
  const spec = { algorithm, limit: 100, window: 60_000, ...(algorithm === "sliding-window" ? { buckets: 10 } : {}) };
  const limiter = new RateLimiter({ limits: [spec], store, clock: () => now });
  const start = mb();
  for (let i = 0; i < N; i++) limiter.consumeNow(`k${i}`);
  const flood = mb();
  now += 180_000;
  store.sweep(now);
  const swept = mb();
  console.log(
    `${algorithm.padEnd(16)} start ${start.toFixed(1)} MB, ${N} keys ${flood.toFixed(1)} MB, swept (store.size ${store.size}) ${swept.toFixed(1)} MB`,
  );
}
