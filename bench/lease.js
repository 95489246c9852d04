// Lease section: quota leasing for one hot key (RateLimiter option `lease`), next to the same key
// decided per decision.
//
// 4 worker processes, each keeping 64 decisions in flight on ONE key of a throw-away redis-server
// (fixed window, a limit too high to be reached, so every decision is an admission and the rows
// compare the cost of deciding), one mode at a time, taking turns within each round:
// - ratekeeper with `lease: true`: blocks of the allowance taken from Redis, decided locally;
// - ratekeeper per decision (the default store: batched EVALSHA), and with `batch: false`;
// - rate-limiter-flexible's RateLimiterRedis on the same key (one call per decision).
// Reported: decisions/s over the 4 processes, the ratio to per-decision ratekeeper, and Redis
// commands per decision (INFO commandstats on the server: every command, those run inside scripts too).
//
// Usage: node bench/lease.js [--runs 3] [--seconds 2] [--markdown]   (or `npm run bench -- lease`)

import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
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
const PROCESSES = 4;
const IN_FLIGHT = 64;

const MODES = {
  "ratekeeper, lease: true": (client, ns) => limiter(client, ns, { lease: true }),
  "ratekeeper, per decision (batched, the default)": (client, ns) => limiter(client, ns, {}),
  "ratekeeper, per decision, batch: false": (client, ns) => limiter(client, ns, {}, { batch: false }),
  "rate-limiter-flexible RateLimiterRedis": (client, ns) => {
    const rl = new RateLimiterRedis({ storeClient: client, points: 1_000_000_000, duration: 60, keyPrefix: ns });
    return () => rl.consume("hot");
  },
};

function limiter(client, ns, extra, storeOptions = {}) {
  const store = new RedisStore({ client, ...storeOptions });
  const l = new RateLimiter({ algorithm: "fixed-window", limit: 1_000_000_000, window: "1m", namespace: ns, store, ...extra });
  const decide = () => l.consume("hot");
  decide.close = () => store.close();
  return decide;
}

/** In a worker: keep IN_FLIGHT decisions going for `seconds`; report how many were made. */
async function worker([mode, port, ns, seconds]) {
  const client = new Redis(Number(port), "127.0.0.1");
  const decide = MODES[mode](client, ns);
  await decide(); // scripts loaded, connection up
  process.send({ type: "ready" });
  await new Promise((r) => process.once("message", r));
  let done = 0;
  const end = performance.now() + Number(seconds) * 1000;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        await decide();
        done++;
      }
    }),
  );
  await decide.close?.(); // gives back unspent blocks
  process.send({ type: "done", done });
  client.disconnect();
  process.exit(0);
}

async function calls(admin) {
  const info = await admin.info("commandstats");
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) if (m[1] !== "info") n += Number(m[2]);
  return n;
}

/** One run of `mode`: 4 processes started, released together; decisions/s and calls per decision. */
async function runMode(server, mode, ns, seconds) {
  const self = fileURLToPath(import.meta.url);
  const kids = Array.from({ length: PROCESSES }, () =>
    fork(self, ["--worker", mode, String(server.port), ns, String(seconds)], { stdio: ["ignore", "inherit", "inherit", "ipc"] }),
  );
  const next = (k, type) => new Promise((resolve) => k.on("message", (m) => m.type === type && resolve(m)));
  await Promise.all(kids.map((k) => next(k, "ready")));
  const before = await calls(server.admin);
  const t0 = performance.now();
  const done = kids.map((k) => next(k, "done"));
  for (const k of kids) k.send("go");
  const counts = await Promise.all(done);
  const elapsed = (performance.now() - t0) / 1000;
  const total = counts.reduce((s, m) => s + m.done, 0);
  return { rate: total / elapsed, perDecision: ((await calls(server.admin)) - before - 1) / total };
}

async function main() {
  const RUNS = Number(opt("--runs", process.env.BENCH_RUNS ?? 3));
  const SECONDS = Number(opt("--seconds", 2));
  const server = await startRedis();
  try {
    console.log(
      `${await machineLine()}; ${PROCESSES} processes x ${IN_FLIGHT} in flight on one key; medians of ${RUNS} rounds of ${SECONDS} s`,
    );
    const names = Object.keys(MODES);
    const results = names.map(() => ({ rate: [], perDecision: [] }));
    for (let run = 0; run < RUNS; run++) {
      for (const [k, name] of names.entries()) {
        const r = await runMode(server, name, `l${run}m${k}`, SECONDS);
        results[k].rate.push(r.rate);
        results[k].perDecision.push(r.perDecision);
      }
    }
    const base = median(results[1].rate);
    const rows = names.map((name, k) => [
      name,
      `${fmtRate(median(results[k].rate))}/s`,
      fmtRatio(median(results[k].rate), base),
      median(results[k].perDecision).toFixed(4),
    ]);
    const t = table(["mode", "decisions/s on one key", "vs per decision", "Redis commands per decision (inside scripts too)"], rows);
    console.log(args.includes("--markdown") ? t.markdown : t.text);
  } finally {
    await server.stop();
  }
}

if (args[0] === "--worker") await worker(args.slice(1));
else await main();
