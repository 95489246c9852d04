// How long the memory store's rebase takes (stores/memory-rebase.ts): the one decision, once
// every 6.2 days of a table's clock, that moves its base forward and shifts every kept key's
// times. Fills one table with N live keys (default 1,000,000) of SPEC (a limit as JSON; default
// a fixed window of 10 a minute) on an injected clock, brings every key up to date just before
// the table's rebase threshold, then times the decision that crosses it (wall ms, one run).
// Usage: node bench/rebase-pass.js [N] [SPEC]   (ROOT=<checkout> to load another build)
// e.g. node bench/rebase-pass.js 1000000 '{"algorithm":"sliding-window","limit":10,"window":60000,"buckets":6}'
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);
const { MemoryStore, resolveLimits } = await import(
  `${process.env.ROOT ?? new URL("..", import.meta.url).pathname}/packages/ratekeeper/dist/index.js`
);
const n = Number(process.argv[2] ?? 1_000_000);
const spec = JSON.parse(process.argv[3] ?? '{"algorithm":"fixed-window","limit":10,"window":60000}');
const table = new MemoryStore({ sweepIntervalMs: 0, maxKeys: 4 * n, maxBytes: 2 ** 40 }).bind(resolveLimits([spec]), "rebase");
const t = 1_764_236_401_237;
for (let i = 0; i < n; i++) table.consume(`k${i}`, 1, t + (i % 1000));
// The table's own fields (not API): its base and the relative reading that rebases.
const at = table.base + table.rebaseAt;
for (let i = 0; i < n; i++) table.consume(`k${i}`, 1, at - 1000 + (i % 500));
const before = table.base;
const t0 = performance.now();
table.consume("trigger", 1, at + 1);
const ms = performance.now() - t0;
if (table.base === before) throw new Error("no rebase happened");
console.log(
  `${spec.algorithm}${spec.buckets > 1 ? ` x${spec.buckets}` : ""} ${n} keys: rebase ${ms.toFixed(1)} ms, base +${table.base - before} ms, ${table.held} keys kept`,
);
