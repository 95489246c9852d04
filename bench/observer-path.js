// The decision service's observer path alone, in process: what the service does per decision
// on the memory store besides deciding, with a fake limiter answering one constant decision:
// the store call's timing (`StoreTimer`, given a memory store; `timedRun` in builds before it),
// the rule's stat key (`ruleStatKey`), `decision()` and `limitHit()`, into the service's
// `TeeObserver(Metrics, DashboardStats)` as `ratekeeper serve` builds it; and the same with no
// observer (the service given none). CPU ns per decision
// (process.cpuUsage), median of `--samples` samples of `--n` decisions, after one warm-up sample.
// A scrape of the metrics every `--scrape-every` decisions (0: none), as Prometheus would.
//
// Usage: node bench/observer-path.js <checkout> [--samples 7] [--n 1000000] [--scrape-every 0]
//   <checkout>: a built tree (`npm run build`). To compare two builds, run it in alternated
//   processes, several pairs, e.g.
//   for i in 1 2 3; do for d in /work/main /work/wt/x; do node bench/observer-path.js $d; done
//   done
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const dir = args[0];
if (!dir || dir.startsWith("--")) throw new Error("usage: node bench/observer-path.js <checkout> [--samples 7] [--n 1000000]");
const flag = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const samples = flag("samples", 7);
const n = flag("n", 1_000_000);
const scrapeEvery = flag("scrape-every", 0);

const dist = `${dir}/packages/server/dist`;
const storeCall = await import(`${dist}/service/store-call.js`);
const { MemoryStore } = await import(`${dir}/packages/ratekeeper/dist/index.js`);
const { ruleStatKey, usedBefore } = await import(`${dist}/service/limit-stats.js`);
const { Metrics } = await import(`${dist}/metrics.js`);
const { DashboardStats, TeeObserver } = await import(`${dist}/dashboard/stats.js`);

const decision = { allowed: true, limit: 100, remaining: 57, resetMs: 1000, retryAfterMs: 0, reason: undefined };
const limiter = { consumeNow: () => decision, peek: () => decision, maxCost: 100 };
const rule = { id: "api/user_id", domain: "api", shadow: false, detailedMetric: false };
const via = ["user_id"];
const entries = [{ key: "user_id", value: "u1" }];

/**
 * The store call as the build makes it: a StoreTimer per service (with the memory store), or
 * before it the function `timedRun(observer, ...)`.
 */
function storeCaller(observer) {
  if (storeCall.StoreTimer === undefined) return (key) => storeCall.timedRun(observer, limiter, key, 1, false);
  const timer = new storeCall.StoreTimer(observer, new MemoryStore());
  return (key) => timer.run(limiter, key, 1, false);
}

/** One decision's observer work, as decide.ts's `apply` and `decided` do it. */
function once(observer, metrics, run, i) {
  const stat = observer?.limitHit ? ruleStatKey(rule, via, entries) : undefined;
  const d = run("api|user_id=u1");
  observer?.decision("api", rule.id, d.allowed ? "ok" : "over_limit", d.allowed ? undefined : "api|user_id=u1");
  if (stat !== undefined) observer?.limitHit?.(stat, d.limit, usedBefore(d, 1), 1);
  if (scrapeEvery > 0 && i % scrapeEvery === 0) void metrics?.registry.metrics();
}

function sample(observer, metrics, run) {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) once(observer, metrics, run, i);
  const c = process.cpuUsage(c0);
  return ((c.user + c.system) * 1000) / n;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const metrics = new Metrics();
const stats = new DashboardStats();
const tee = new TeeObserver(metrics, stats);
const out = {};
for (const [name, observer, m] of [
  ["observers on", tee, metrics],
  ["no observer", undefined, undefined],
]) {
  const run = storeCaller(observer);
  sample(observer, m, run);
  const xs = [];
  for (let s = 0; s < samples; s++) xs.push(sample(observer, m, run));
  out[name] = median(xs);
}
console.log(
  `${dir}: ${Object.entries(out)
    .map(([k, v]) => `${k} ${v.toFixed(1)} ns`)
    .join(", ")}`,
);
