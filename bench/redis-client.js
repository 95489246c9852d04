// Bench section "redis-client": the CPU the RedisStore itself spends per decision in this
// process, without Redis: an ioredis-shaped client that answers every script call at once (the
// counter layout's integer for the fast path; five integers and a TIME reading for the general
// path). What is left is ratekeeper's own work per decision: the limiter, the store's lanes,
// breaker, watchdog, server clock, keys and arguments, and the decision built from the reply.
// Rows: fixed window (counter layout, fast path), token bucket (fast path), a two-limit policy
// (general path), each `batch: false`, one call in flight; plus the fake call alone (floor).
// Each case runs --rounds rounds of --n calls, interleaved; quoted: median and least CPU ns per call.
//
// Usage: node bench/redis-client.js [--rounds 9] [--n 100000]   (`npm run bench -- redis-client`)
// To compare two versions, run it in both checkouts one after the other, alternating.

import { RateLimiter } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { machineLine, table } from "./lib/format.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : dflt;
};
const ROUNDS = opt("--rounds", 9);
const N = opt("--n", 100_000);

/**
 * A client answering like ratekeeper.lua: on the fast path ("C"/"P" as ARGV[1]) with `fast` (the
 * counter layout's 0, or null: a fresh bucket), else 5 integers per limit and a TIME reading.
 */
function instant(fast) {
  const answer = (numKeys, rest) => {
    const mode = rest[numKeys];
    if (mode === "C" || mode === "P") return fast;
    const reply = [];
    for (let i = 0; i < Number(rest[numKeys + 1]); i++) reply.push(1, 0, 0, 0, 0);
    reply.push(Date.now() * 1000);
    return reply;
  };
  return {
    status: "ready",
    isCluster: false,
    evalsha: (_sha, n, ...rest) => Promise.resolve(answer(n, rest)),
    eval: (_s, n, ...rest) => Promise.resolve(answer(n, rest)),
    evalshaBuffer: (_sha, n, ...rest) => Promise.resolve(answer(n, rest)),
    evalBuffer: (_s, n, ...rest) => Promise.resolve(answer(n, rest)),
    del: () => Promise.resolve(0),
  };
}

const store = (fast) => new RedisStore({ client: instant(fast), batch: false });
const cases = [
  ["fixed window (counter layout, fast path)", new RateLimiter({ algorithm: "fixed-window", limit: 1e9, window: 60_000, store: store(0) })],
  ["token bucket (fast path)", new RateLimiter({ algorithm: "token-bucket", limit: 1e9, window: 60_000, store: store(null) })],
  [
    "two limits (general path)",
    new RateLimiter({
      limits: [
        { algorithm: "fixed-window", limit: 1e9, window: 60_000 },
        { algorithm: "sliding-window", limit: 1e9, window: 3_600_000 },
      ],
      store: store(null),
    }),
  ],
];
const floorClient = instant(0);

let sink = 0;
async function cpuNs(fn) {
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) sink += (await fn(i)) ? 1 : 0;
  const c = process.cpuUsage(c0);
  return ((c.user + c.system) * 1000) / N;
}
const keys = Array.from({ length: 1024 }, (_, i) => `user:${i}`);
const runs = new Map([["the fake call alone (floor)", []], ...cases.map(([name]) => [name, []])]);
for (const [, l] of cases) await l.consume("warm"); // the first call reads Redis's clock
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, l] of r % 2 ? [...cases].reverse() : cases)
    runs.get(name).push(await cpuNs((i) => l.consume(keys[i & 1023]).then((d) => d.allowed)));
  runs.get("the fake call alone (floor)").push(await cpuNs((i) => floorClient.evalshaBuffer("sha", 1, keys[i & 1023], "C", "1", "1")));
}
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`redis-client: ${await machineLine()}`);
console.log(`RedisStore's own CPU per decision, instant fake client, one call in flight; ${ROUNDS} rounds x ${N} calls (sink ${sink % 2})`);
const t = table(
  ["case", "median ns/decision", "least ns/decision"],
  [...runs].map(([name, xs]) => [name, median(xs).toFixed(0), Math.min(...xs).toFixed(0)]),
);
console.log(t.text);
if (args.includes("--markdown")) console.log(`\n${t.markdown}`);
