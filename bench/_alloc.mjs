import { RateLimiter } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
const fast = 0;
const answer = (numKeys, rest) => { const mode = rest[numKeys]; if (mode === "C" || mode === "P") return process.argv[2] === "fixed-window" ? 0 : null; const reply = []; for (let i = 0; i < Number(rest[numKeys + 1]); i++) reply.push(1, 0, 0, 0, 0); reply.push(Date.now() * 1000); return reply; };
const client = { status: "ready", isCluster: false,
    evalsha: (_sha, n, ...rest) => Promise.resolve(answer(n, rest)),
    eval: (_s, n, ...rest) => Promise.resolve(answer(n, rest)),
    evalshaBuffer: (_sha, n, ...rest) => Promise.resolve(answer(n, rest)),
    evalBuffer: (_s, n, ...rest) => Promise.resolve(answer(n, rest)),
    del: () => Promise.resolve(0) };
const limiter = new RateLimiter({ algorithm: process.argv[2] ?? "fixed-window", limit: 1e9, window: 60000, store: new RedisStore({ client, batch: false, failure: "throw", timeoutMs: 5000 }) });
const KEYS = Array.from({ length: 50000 }, (_, i) => `user:${100000 + i}`);
await limiter.consume('warm');
const call = process.env.FLOOR ? (k) => client.evalshaBuffer('abc', 1, `rk:{x:${k}}`, 'C', String(Date.now()), '1') : (k) => limiter.consume(k);
const inflight = Number(process.argv[3] ?? 1);
async function run(n) { let next = 0; await Promise.all(Array.from({ length: inflight }, async () => { while (next < n) { await call(KEYS[next++ % KEYS.length]); } })); }
await run(20000); await run(20000);
const res = [];
for (let r = 0; r < 5; r++) { globalThis.gc(); const h0 = process.memoryUsage().heapUsed; await run(20000); const h1 = process.memoryUsage().heapUsed; res.push((h1 - h0) / 20000); }
res.sort((a, b) => a - b); console.log(process.argv[2], "inflight", inflight, "bytes/decision (heapUsed delta, median of 5):", res[2].toFixed(0), res.map((x) => x.toFixed(0)).join(" "));
