import { Redis } from "ioredis";
import { RateLimiter } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { RateLimiterRedis } from "rate-limiter-flexible";
const port = Number(process.argv[3]);
const c = new Redis(port, "127.0.0.1");
const which = process.argv[2];
let call;
if (which === "rlflx") { const l = new RateLimiterRedis({ storeClient: c, points: 100, duration: 60, keyPrefix: "rlflx" }); call = (k) => l.consume(k).then(() => true, (e) => { if (e instanceof Error) throw e; return false; }); }
else { const limiter = new RateLimiter({ algorithm: which, limit: 100, window: 60000, store: new RedisStore({ client: process.env.DIRECT ? { evalsha: (...a) => c.evalsha(...a), eval: (...a) => c.eval(...a), evalshaBuffer: (...a) => c.evalshaBuffer(...a), evalBuffer: (...a) => c.evalBuffer(...a), del: (...a) => c.del(...a), get status() { return c.status; }, script: (...a) => c.script(...a) } : c, batch: process.argv[4] === "batch", failure: "throw", timeoutMs: 5000 }) }); call = async (k) => (await limiter.consume(k)).allowed; }
const KEYS = Array.from({ length: 50000 }, (_, i) => `user:${100000 + i}`);
async function drive(ms, inflight) { let next = 0, done = 0; const end = performance.now() + ms; await Promise.all(Array.from({ length: inflight }, async () => { while (performance.now() < end) { await call(KEYS[next++ % KEYS.length]); done++; } })); return done; }
await drive(1000, 256);
if (process.env.HEAP) await import('./_heap.mjs');
const u0 = process.cpuUsage(); const t0 = performance.now();
if (process.env.SNAP) { await import('./_snap.mjs'); setTimeout(() => globalThis.__snap(), 1500); }
const n = await drive(Number(process.env.MS ?? 3000), 256);
const u = process.cpuUsage(u0); const dt = performance.now() - t0;
console.log(which, process.argv[4] ?? "", `${(n / dt * 1000 / 1000).toFixed(1)}k/s`, `client CPU ${((u.user + u.system) / n).toFixed(2)} us/dec`);
if (process.env.HEAP) await globalThis.__stopHeap(n);
c.disconnect(); process.exit(0);
