// Outage section: what a decision costs while Redis is down, when an app is under stress and may
// get a retry storm. The client (ioredis, no offline queue, as the service configures it) points
// at a port where nothing listens, so it is reconnecting the whole time: ratekeeper's breaker is
// open and each failure policy answers without a call; rate-limiter-flexible's RateLimiterRedis
// fails each call and, with an `insuranceLimiter`, asks its RateLimiterMemory.
//
// Reported per case: CPU time per decision (user + system, process.cpuUsage), awaited one at a
// time over 1,000 keys. Each case runs in a process of its own, the cases taking turns within each
// round; medians of the rounds. `--compare DIR` also runs ratekeeper's cases on another build of
// the library (DIR: a packages/ratekeeper directory with its dist/ built), taking turns with this
// one, and prints both.
//
// Usage: node bench/outage.js [--runs 7] [--decisions 100000] [--compare DIR] [--markdown]
//   (or `npm run bench -- outage`)

import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath, pathToFileURL } from "node:url";
import { fmtSpread, machineLine, table } from "./lib/format.js";
import { median, spread } from "./lib/stats.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
};

/** ratekeeper's failure policies, then the peer's two ways of failing. */
const CASES = [
  { name: "ratekeeper degraded (default)", policy: "degraded" },
  { name: "ratekeeper insurance (MemoryStore)", policy: "insurance" },
  { name: "ratekeeper open", policy: "open" },
  { name: "ratekeeper closed", policy: "closed" },
  { name: "ratekeeper throw", policy: "throw" },
  { name: "rate-limiter-flexible insuranceLimiter (RateLimiterMemory)", peer: "insurance" },
  { name: "rate-limiter-flexible (rejects with the error)", peer: "throw" },
];
const WARM_UP = 20_000;
const KEYS = Array.from({ length: 1000 }, (_, i) => `ip:10.0.${i >> 8}.${i & 255}`);

/** A child: `--child <case index> <decisions> <port> [lib dir]`; prints its CPU ns per decision. */
async function child(index, n, port, lib) {
  const c = CASES[index];
  const { Redis } = await import("ioredis");
  const client = new Redis(port, "127.0.0.1", { enableOfflineQueue: false, retryStrategy: () => 100, maxRetriesPerRequest: 0 });
  client.on("error", () => undefined);
  await new Promise((r) => setTimeout(r, 300)); // the first connection refused: reconnecting
  let decide;
  if (c.policy !== undefined) {
    const rk = lib ? await import(pathToFileURL(`${lib}/dist/index.js`).href) : await import("ratekeeper");
    const { RedisStore } = lib ? await import(pathToFileURL(`${lib}/dist/stores/redis/index.js`).href) : await import("ratekeeper/redis");
    const failure = c.policy === "insurance" ? { insurance: new rk.MemoryStore() } : c.policy;
    const store = new RedisStore({ client, failure, instances: 2 });
    const limiter = new rk.RateLimiter({ algorithm: "fixed-window", limit: 1_000_000_000, window: "1h", store, namespace: "b" });
    decide = async (key) => {
      try {
        if ((await limiter.consume(key)).reason === undefined) throw new Error("decided by Redis");
      } catch (e) {
        if (c.policy !== "throw" || e.name !== "RateLimitStoreError") throw e;
      }
    };
  } else {
    const { RateLimiterRedis, RateLimiterMemory } = await import("rate-limiter-flexible");
    const o = { storeClient: client, points: 1_000_000_000, duration: 3600, keyPrefix: "b" };
    const rl = new RateLimiterRedis(
      c.peer === "insurance" ? { ...o, insuranceLimiter: new RateLimiterMemory({ points: 1_000_000_000, duration: 3600 }) } : o,
    );
    decide = async (key) => {
      try {
        await rl.consume(key);
      } catch (e) {
        if (c.peer !== "throw" || !(e instanceof Error)) throw e;
      }
    };
  }
  for (let i = 0; i < WARM_UP; i++) await decide(KEYS[i % KEYS.length]);
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await decide(KEYS[i % KEYS.length]);
  const cu = process.cpuUsage(c0);
  console.log(JSON.stringify({ cpuNs: ((cu.user + cu.system) * 1000) / n }));
  client.disconnect();
  process.exit(0);
}

function runChild(index, n, port, lib) {
  return new Promise((resolve, reject) => {
    const extra = lib ? [lib] : [];
    const p = spawn(process.execPath, [fileURLToPath(import.meta.url), "--child", String(index), String(n), String(port), ...extra], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out).cpuNs) : reject(new Error(`${CASES[index].name}: exit code ${code}`))));
  });
}

/** A loopback port where nothing listens (taken from the OS, then released). */
function deadPort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const fmtUs = (ns) => `${(ns / 1000).toFixed(2)} us`;

if (args[0] === "--child") {
  await child(Number(args[1]), Number(args[2]), Number(args[3]), args[4]);
} else {
  const RUNS = Number(opt("--runs", process.env.BENCH_RUNS ?? 7));
  const N = Number(opt("--decisions", 100_000));
  const COMPARE = opt("--compare", undefined);
  const port = await deadPort();
  console.log(
    `${await machineLine()}; Redis down (nothing listening); ${N} decisions per process after ${WARM_UP} warm-up; medians of ${RUNS} rounds`,
  );
  const now = CASES.map(() => []);
  const before = CASES.map(() => []);
  for (let run = 0; run < RUNS; run++) {
    for (let k = 0; k < CASES.length; k++) {
      now[k].push(await runChild(k, N, port));
      if (COMPARE && CASES[k].policy !== undefined) before[k].push(await runChild(k, N, port, COMPARE));
    }
  }
  const header = ["case", "CPU per decision", "spread"];
  if (COMPARE) header.push("--compare build", "this / compare");
  const rows = CASES.map((c, k) => {
    const row = [c.name, fmtUs(median(now[k])), fmtSpread(spread(now[k]))];
    if (COMPARE) {
      const b = before[k].length > 0 ? median(before[k]) : NaN;
      row.push(Number.isNaN(b) ? "" : fmtUs(b), Number.isNaN(b) ? "" : `${(median(now[k]) / b).toFixed(2)}x`);
    }
    return row;
  });
  const t = table(header, rows);
  console.log(args.includes("--markdown") ? t.markdown : t.text);
}
