// Overload section: decisions on a busy machine, with DEFAULT options on both sides.
//
// One busy-loop process competes for the CPU the whole time (as on a loaded app server), and one
// process keeps 256 decisions in flight against a throw-away redis-server: ratekeeper's
// `new RedisStore({ client })` next to rate-limiter-flexible's `new RateLimiterRedis({ storeClient })`,
// taking turns within each round. Reported per implementation: decisions/s, p50 / p99 latency,
// and how many decisions did NOT come from Redis (ours: a failure policy's or backpressure's
// reason; rate-limiter-flexible: rejections with an error). While Redis is healthy that count
// must be 0: a limiter that times out its own backlog on a busy machine would answer from its
// failure policy instead.
//
// Usage: node bench/overload.js [--runs 3] [--seconds 2] [--markdown]   (or `npm run bench -- overload`)

import { spawn } from "node:child_process";
import { Redis } from "ioredis";
import { RateLimiter } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { fmtRate, fmtRatio, machineLine, table } from "./lib/format.js";
import { startRedis } from "./lib/redis-server.js";
import { median } from "./lib/stats.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
};
const RUNS = Number(opt("--runs", process.env.BENCH_RUNS ?? 3));
const SECONDS = Number(opt("--seconds", 2));
const MARKDOWN = args.includes("--markdown");
const IN_FLIGHT = 256;
const KEYS = Array.from({ length: 10_000 }, (_, i) => `user:${i}`);
/** Reasons that mean "not decided by Redis". */
const NOT_REDIS = new Set(["store-error", "insurance", "degraded", "overloaded"]);

const IMPLS = [
  {
    name: "ratekeeper fixed window (defaults)",
    make(client, ns) {
      const limiter = new RateLimiter({
        algorithm: "fixed-window",
        limit: 1_000_000_000,
        window: "1m",
        namespace: ns,
        store: new RedisStore({ client }),
      });
      return async (key) => {
        const d = await limiter.consume(key);
        return d.reason !== undefined && NOT_REDIS.has(d.reason);
      };
    },
  },
  {
    name: "ratekeeper gcra (defaults)",
    make(client, ns) {
      const limiter = new RateLimiter({
        algorithm: "gcra",
        limit: 1_000_000_000,
        window: "1m",
        namespace: ns,
        store: new RedisStore({ client }),
      });
      return async (key) => {
        const d = await limiter.consume(key);
        return d.reason !== undefined && NOT_REDIS.has(d.reason);
      };
    },
  },
  {
    name: "rate-limiter-flexible RateLimiterRedis (defaults)",
    make(client, ns) {
      const rl = new RateLimiterRedis({ storeClient: client, points: 1_000_000_000, duration: 60, keyPrefix: ns });
      return async (key) => {
        try {
          await rl.consume(key);
          return false;
        } catch (e) {
          return e instanceof Error; // a RateLimiterRes is a denial by Redis; an Error is a failure
        }
      };
    },
  },
];

/** Keeps IN_FLIGHT decisions going for `seconds`; returns decisions/s, latencies and non-Redis count. */
async function drive(decide, seconds) {
  const lat = [];
  let done = 0;
  let notRedis = 0;
  let i = 0;
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        const s = performance.now();
        if (await decide(KEYS[i++ % KEYS.length])) notRedis++;
        lat.push(performance.now() - s);
        done++;
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { rate: done / elapsed, p50: lat[Math.floor(lat.length * 0.5)], p99: lat[Math.floor(lat.length * 0.99)], notRedis, done };
}

const server = await startRedis();
const busy = spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" });
try {
  console.log(`${await machineLine()}; one busy-loop process competing; ${IN_FLIGHT} in flight; medians of ${RUNS} rounds of ${SECONDS} s`);
  const clients = IMPLS.map(() => new Redis(server.port, "127.0.0.1"));
  const decide = IMPLS.map((impl, k) => impl.make(clients[k], `ov${k}`));
  for (const d of decide) await drive(d, 0.3); // warm up: scripts loaded, JIT settled
  const results = IMPLS.map(() => ({ rate: [], p50: [], p99: [], notRedis: 0, done: 0 }));
  for (let run = 0; run < RUNS; run++) {
    for (let k = 0; k < IMPLS.length; k++) {
      const r = await drive(decide[k], SECONDS);
      const acc = results[k];
      acc.rate.push(r.rate);
      acc.p50.push(r.p50);
      acc.p99.push(r.p99);
      acc.notRedis += r.notRedis;
      acc.done += r.done;
    }
  }
  const peer = median(results[IMPLS.length - 1].rate);
  const rows = IMPLS.map((impl, k) => {
    const r = results[k];
    return [
      impl.name,
      `${fmtRate(median(r.rate))}/s`,
      fmtRatio(median(r.rate), peer),
      `${median(r.p50).toFixed(2)} ms`,
      `${median(r.p99).toFixed(2)} ms`,
      `${r.notRedis} of ${r.done}`,
    ];
  });
  const t = table(["implementation", "decisions/s", "vs rate-limiter-flexible", "p50", "p99", "not decided by Redis"], rows);
  console.log(MARKDOWN ? t.markdown : t.text);
  for (const c of clients) c.disconnect();
} finally {
  busy.kill("SIGKILL");
  await server.stop();
}
