// Whether what ran before in a process changes a scenario's speed: CPU ns per awaited call (or
// per call not awaited) of one target scenario, measured after optional earlier phases in the
// same process, as bench/memory.js's child runs its groups in turn (the hot-key groups, then the
// 100,000 keys). Run it alternately with and without the earlier phases, several pairs, under
// the bench lock; the two medians should agree if the library keeps no trace of earlier traffic
// (docs/benchmarks/memory.md, "the fixed window over 100,000 keys after the hot-key groups").
// Usage: node --expose-gc bench/history.js <target> [<phase>,<phase>,...]   (ROOT=<checkout>: another build)
// A target or phase is <who>-<keys>-<traffic>: who = ours (await consume), sync (consumeNow, not
// awaited) or erl (express-rate-limit's MemoryStore.increment); keys = hot (one key) or many
// (100,000 in order); traffic = allowed or denied. ALG picks our algorithm (default fixed-window).
// e.g. node --expose-gc bench/history.js ours-many-allowed ours-hot-allowed,sync-hot-allowed,ours-hot-denied,sync-hot-denied
// Each phase: a fresh limiter, every key prefilled, ~1 s of calls through a freshly compiled loop
// (bench/lib/measure.js), then a full collection; the target: the same, then 7 rounds of ~300 ms.
import { helpOnRequest } from "./lib/usage.js";
import { compileLoop } from "./lib/measure.js";

helpOnRequest(import.meta.url);
const ROOT = process.env.ROOT ?? new URL("..", import.meta.url).pathname;
const { RateLimiter, MemoryStore } = await import(`${ROOT}/packages/ratekeeper/dist/index.js`);
const { MemoryStore: Erl } = await import("express-rate-limit");
const HOUR = 3_600_000;
const KEYS = { hot: ["hot-key"], many: Array.from({ length: 100_000 }, (_, i) => `user:${i}`) };
const ALG = process.env.ALG ?? "fixed-window";

async function make(spec) {
  const [who, keys, traffic] = spec.split("-");
  if (!["ours", "sync", "erl"].includes(who) || !KEYS[keys] || !["allowed", "denied"].includes(traffic))
    throw new Error(`not a scenario: ${spec} (see --help)`);
  let call;
  if (who === "erl") {
    const s = new Erl();
    s.init({ windowMs: HOUR });
    call = (k) => s.increment(k); // the bench's denied traffic is a count above the limit: the same calls
  } else {
    const limit = traffic === "denied" ? 1 : 1e9;
    const lim = new RateLimiter({
      algorithm: ALG,
      limit,
      window: HOUR,
      ...(ALG === "gcra" ? { burst: limit - 1 } : {}),
      store: new MemoryStore(),
    });
    call = who === "sync" ? (k) => lim.consumeNow(k) : (k) => lim.consume(k);
  }
  for (const k of KEYS[keys]) await call(k);
  return { call, keys: KEYS[keys], sync: who === "sync" };
}

/** `rounds` samples of about `ms` each, in ns per call of CPU time. */
async function run(spec, ms, rounds) {
  const c = await make(spec);
  const loop = compileLoop(c.sync);
  await loop(c.call, c.keys, 200_000);
  const [, cpu0] = await loop(c.call, c.keys, 200_000);
  const n = Math.max(100_000, Math.round((200_000 / cpu0) * ms * 1e6));
  const out = [];
  for (let r = 0; r < rounds; r++) {
    globalThis.gc?.({ type: "minor" });
    const [, cpu] = await loop(c.call, c.keys, n);
    out.push(cpu / n);
  }
  return out;
}

const [target, before = ""] = process.argv.slice(2);
if (!target) throw new Error("usage: node --expose-gc bench/history.js <target> [<phase>,...] (see --help)");
for (const p of before.split(",").filter(Boolean)) {
  await run(p, 200, 3);
  globalThis.gc?.();
  await new Promise((r) => setTimeout(r, 300));
}
const r = (await run(target, 300, 7)).sort((a, b) => a - b);
console.log(`${ALG} ${target} after [${before}]: median ${r[3].toFixed(1)} ns a call (min ${r[0].toFixed(1)}, max ${r[6].toFixed(1)})`);
