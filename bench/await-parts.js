// What an awaited hot-key decision is made of: CPU ns per call of `await limiter.consume(key)` on
// one hot key (allowed traffic), next to its parts measured the same way, with the bench's
// compiled loop (bench/lib/measure.js): the decision not awaited (`consumeNow`), an empty async
// function, one returning a fresh Decision-shaped object (plain, and through Promise.resolve as
// `consume` returns it), `Promise.resolve(consumeNow(key))` without reading a field first, and one
// returning Date.now(). Each variant runs in its own process (so V8 compiles each loop for it
// alone), the variants alternated, `--passes` times (docs/benchmarks/memory.md, "The hot-key rows").
// Usage: node bench/await-parts.js [--passes 2] [--calls 3000000] [--rounds 5]   (ALG=gcra etc.)
// Run it under the bench lock; about 4 s per variant and pass.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { helpOnRequest } from "./lib/usage.js";
import { compileLoop } from "./lib/measure.js";

helpOnRequest(import.meta.url);
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : dflt;
};
const ALG = process.env.ALG ?? "token-bucket";
const VARIANTS = ["consume", "consumeNow", "empty", "fresh", "freshResolved", "resolveBare", "dateNow"];

/** In a child: the median CPU ns per call of one variant. */
async function child(variant, calls, rounds) {
  const { RateLimiter, MemoryStore } = await import("ratekeeper");
  const limit = 1e9;
  const spec = { algorithm: ALG, limit, window: 3_600_000, ...(ALG === "gcra" ? { burst: limit - 1 } : {}) };
  const lim = new RateLimiter({ ...spec, store: new MemoryStore() });
  let n = 0;
  const fresh = () => ({
    allowed: true,
    limit: 1,
    remaining: ++n,
    retryAfterMs: 0,
    resetAfterMs: 1,
    delayMs: 0,
    reason: undefined,
    policy: 0,
    policyName: "x",
    windowMs: 1,
    limits: undefined,
  });
  const fns = {
    consume: (k) => lim.consume(k),
    consumeNow: (k) => lim.consumeNow(k),
    empty: async function empty(_k) {},
    fresh: async function freshObject(_k) {
      return fresh();
    },
    freshResolved: (_k) => {
      const d = fresh();
      return d.allowed === undefined ? d : Promise.resolve(d);
    },
    resolveBare: (k) => Promise.resolve(lim.consumeNow(k)),
    dateNow: async function dateNow(_k) {
      return Date.now();
    },
  };
  const loop = compileLoop(variant === "consumeNow");
  const keys = ["hot-key"];
  await loop(fns[variant], keys, 200_000);
  const ns = [];
  for (let r = 0; r < rounds; r++) {
    const [, cpu] = await loop(fns[variant], keys, calls);
    ns.push(cpu / calls);
  }
  ns.sort((a, b) => a - b);
  return ns[rounds >> 1];
}

if (args[0] === "--child") {
  process.stdout.write(`${await child(args[1], opt("--calls", 3_000_000), opt("--rounds", 5))}\n`);
} else {
  const passes = opt("--passes", 2);
  const pass = ["--calls", String(opt("--calls", 3_000_000)), "--rounds", String(opt("--rounds", 5))];
  const res = new Map(VARIANTS.map((v) => [v, []]));
  for (let p = 0; p < passes; p++) {
    for (const v of VARIANTS) {
      const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", v, ...pass], { encoding: "utf8" });
      if (r.status !== 0) throw new Error(`${v}: ${r.stderr}`);
      res.get(v).push(Number(r.stdout).toFixed(1));
    }
  }
  console.log(`${ALG}, one hot key, allowed: CPU ns per call, median of each process's rounds, ${passes} passes`);
  for (const [v, ns] of res) console.log(`${v.padEnd(14)} ${ns.join("  ")}`);
}
