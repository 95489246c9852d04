// Redis section: RedisStore (ratekeeper/redis) next to rate-limiter-flexible's RateLimiterRedis,
// express-rate-limit's rate-limit-redis and rolling-rate-limiter (ClassDojo's sorted-set log),
// measured in the same run against the same throw-away redis-server, over one ioredis connection
// each (default options: no auto-pipelining).
//
// Usage: node bench/redis.js [--runs 3] [--seconds 1.5] [--only <substring>[|<substring>...]] [--markdown]
//        (or `npm run bench -- redis`, which builds first)
//
// Ours run with the defaults (batch: true on a single Redis: decisions that wait while two script
// calls are in flight go together) and, for three algorithms, with batch: false (exactly one
// script call per decision).
// Per implementation it reports: decisions/s from one process with 1 and 256 calls in flight,
// p50/p99 latency at each, Redis CPU microseconds per decision (INFO cpu, user + sys, over the
// 256-in-flight runs), Redis commands per decision (INFO commandstats, commands run inside
// scripts included; "calls" = commands the client sent), and bytes of Redis memory per key
// (MEMORY USAGE over a sample of keys). Then a hot denied key: one key far over its limit.
// Medians of --runs rounds; the implementations take turns within each round.

// Longer than the ~350 lines of a source file, and its main() longer than 60, on purpose: a
// section is one script a reader follows top to bottom (its variants, how each is started and
// loaded, the table it prints), like a lab protocol; the parts sections share (timing, statistics,
// formatting, redis-server) are in bench/lib/.

import { spawnSync } from "node:child_process";
import { Redis } from "ioredis";
import { RateLimiter } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { RedisStore as RateLimitRedisStore } from "rate-limit-redis";
import { RedisRateLimiter as RollingRedisRateLimiter } from "rolling-rate-limiter";
import { Ratelimit as UpstashRatelimit } from "@upstash/ratelimit";
import { cpus } from "node:os";
import { createHash } from "node:crypto";
import { fmtRate, fmtRatio, machineLine, table } from "./lib/format.js";
import { startRedis as startRedisServer } from "./lib/redis-server.js";
import { median } from "./lib/stats.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
};
const RUNS = Number(opt("--runs", process.env.BENCH_RUNS ?? 3));
const SECONDS = Number(opt("--seconds", 1.5));
/** Implementations whose name contains any of these ("|"-separated). */
const ONLY = opt("--only", "").split("|");
const MARKDOWN = args.includes("--markdown");

/** Two cores or more: redis-server on CPU 1 and this process on CPU 0 (taskset), so they never share one. */
let PINNED = false;
function pin() {
  PINNED = cpus().length >= 2 && spawnSync("taskset", ["-cp", "0", String(process.pid)]).status === 0;
}

const LIMIT = 100;
const WINDOW_MS = 60_000;
const KEYS = Array.from({ length: 50_000 }, (_, i) => `user:${100000 + i}`);

const startRedis = () => startRedisServer({ cpu: PINNED ? 1 : undefined });

async function usedMemory(admin) {
  return Number(/used_memory:(\d+)/.exec(await admin.info("memory"))[1]);
}

async function redisCpuUs(admin) {
  const info = await admin.info("cpu");
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)[1]);
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)[1]);
  return (user + sys) * 1e6;
}

async function commandStats(admin) {
  const text = await admin.info("commandstats");
  const out = {};
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
  return out;
}

// ------------------------------------------------------------------ implementations
// Each: { name, prefix (to find its keys), make(client) -> (key) => Promise<boolean allowed> }.
const rk = (algorithm, extra = {}) => ({
  name: `ratekeeper ${algorithm}${extra.label ? ` ${extra.label}` : ""}${extra.batch === false ? " [batch: false]" : ""}`,
  ours: true,
  algorithm: extra.label ? `${algorithm} ${extra.label}` : algorithm,
  prefix: "rk:",
  make: (client) => {
    const { label: _label, batch, ...spec } = extra;
    const limiter = new RateLimiter({
      algorithm,
      limit: LIMIT,
      window: WINDOW_MS,
      ...spec,
      store: new RedisStore({ client, timeoutMs: 5000, failure: "throw", ...(batch === undefined ? {} : { batch }) }),
    });
    return async (key) => (await limiter.consume(key)).allowed;
  },
});

/**
 * @upstash/ratelimit 2 against this Redis: its own scripts and commands, sent over ioredis through
 * a small adapter instead of the Upstash REST client (which needs an Upstash endpoint). The
 * Redis work per decision (commands, CPU, memory) is the library's; its decisions/s here are
 * higher than over HTTPS. Its in-process "ephemeral cache" of blocked keys is turned off, as
 * ratekeeper's denialCache is off by default.
 */
function upstash(label, algorithm) {
  return {
    name: `@upstash/ratelimit ${label}`,
    prefix: `up-${label.replace(/ /g, "-")}`,
    peerOf: { "fixed window": "fixed-window", "sliding window": "sliding-window", "token bucket": "token-bucket" }[label],
    make: (client) => {
      // Its scripts open with "#!lua flags=allow-key-locking", a flag Redis 7.0 refuses (newer
      // Redis and Upstash accept it; it changes nothing here): load them without it, under their
      // own SHA, so EVALSHA finds them as it would there.
      const loaded = new Map();
      const redis = {
        evalsha: (sha, keys, argv) => {
          const mine = loaded.get(sha);
          if (mine === undefined) return Promise.reject(new Error("NOSCRIPT No matching script"));
          return client.evalsha(mine, keys.length, ...keys, ...argv.map(String));
        },
        eval: async (script, keys, argv) => {
          const mine = await client.script("LOAD", script.replace(/^#!lua flags=[^\n]*\n/, "#!lua\n"));
          loaded.set(createHash("sha1").update(script).digest("hex"), mine);
          return client.evalsha(mine, keys.length, ...keys, ...argv.map(String));
        },
      };
      const l = new UpstashRatelimit({
        redis,
        limiter: algorithm(LIMIT, `${WINDOW_MS / 1000} s`),
        prefix: `up-${label.replace(/ /g, "-")}`,
        ephemeralCache: false,
        analytics: false,
      });
      return async (key) => (await l.limit(key)).success;
    },
  };
}

const IMPLS = [
  rk("fixed-window"),
  rk("sliding-log"),
  rk("sliding-window"),
  rk("sliding-window", { buckets: 10, label: "(10 sub-windows)" }),
  rk("token-bucket"),
  rk("leaky-bucket"),
  rk("gcra", { burst: 10 }),
  rk("fixed-window", { batch: false }),
  rk("sliding-log", { batch: false }),
  rk("sliding-window", { batch: false }),
  rk("token-bucket", { batch: false }),
  rk("gcra", { burst: 10, batch: false }),
  {
    name: "rate-limiter-flexible RateLimiterRedis (fixed window)",
    baseline: true,
    peerOf: "fixed-window",
    prefix: "rlflx",
    make: (client) => {
      const l = new RateLimiterRedis({ storeClient: client, points: LIMIT, duration: WINDOW_MS / 1000, keyPrefix: "rlflx" });
      return (key) =>
        l.consume(key).then(
          () => true,
          (e) => {
            if (e instanceof Error) throw e;
            return false; // a denial is a rejection with a RateLimiterRes
          },
        );
    },
  },
  {
    name: "rate-limit-redis (express-rate-limit store, fixed window)",
    peerOf: "fixed-window",
    prefix: "rl:",
    make: (client) => {
      const store = new RateLimitRedisStore({ sendCommand: (...a) => client.call(...a), prefix: "rl:" });
      store.init({ windowMs: WINDOW_MS });
      return async (key) => (await store.increment(key)).totalHits <= LIMIT;
    },
  },
  {
    name: "rolling-rate-limiter (sorted-set sliding log)",
    peerOf: "sliding-log",
    prefix: "rrl",
    make: (client) => {
      const l = new RollingRedisRateLimiter({ client, namespace: "rrl", interval: WINDOW_MS, maxInInterval: LIMIT });
      return async (key) => !(await l.limit(key));
    },
  },
  upstash("fixed window", (l, w) => UpstashRatelimit.fixedWindow(l, w)),
  upstash("sliding window", (l, w) => UpstashRatelimit.slidingWindow(l, w)),
  upstash("token bucket", (l, w) => UpstashRatelimit.tokenBucket(l, w, l)),
  {
    // The least a fixed window can cost as a Lua script here: TIME, GET, compare, SET PX.
    name: "floor: hand-written fixed-window Lua (TIME+GET+SET), for scale",
    prefix: "floor:",
    make: (client) => {
      client.defineCommand("rkFloor", {
        numberOfKeys: 1,
        lua: `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, W = tonumber(ARGV[1]), tonumber(ARGV[2])
local raw = redis.call("GET", KEYS[1])
local a, b = 0, 0
if raw then a, b = struct.unpack("<i6i6", raw) end
local start = now - math.fmod(now, W)
local count = 0
if a == start then count = b end
local endsIn = start + W - now
if count + 1 <= limit then
  redis.call("SET", KEYS[1], struct.pack("<i6i6", start, count + 1), "PX", endsIn)
  return {1, limit - count - 1, 0, endsIn, 0}
end
return {0, limit - count, endsIn, endsIn, 0}`,
      });
      return async (key) => (await client.rkFloor(`floor:${key}`, LIMIT, WINDOW_MS))[0] === 1;
    },
  },
  {
    name: "minimal Lua script (EVALSHA return 1), for scale",
    prefix: "none",
    make: (client) => {
      client.defineCommand("rkNoop", { numberOfKeys: 1, lua: "return 1" });
      return async (key) => (await client.rkNoop(key)) === 1;
    },
  },
].filter((i) => ONLY.some((o) => i.name.includes(o)));

// ------------------------------------------------------------------ driver
async function drive(call, keys, inflight, ms) {
  let next = 0;
  let done = 0;
  let allowed = 0;
  const lat = [];
  const t0 = performance.now();
  const end = t0 + ms;
  async function worker() {
    while (performance.now() < end) {
      const key = keys[next++ % keys.length];
      const s = performance.now();
      if (await call(key)) allowed++;
      lat.push(performance.now() - s);
      done++;
    }
  }
  await Promise.all(Array.from({ length: inflight }, worker));
  const elapsed = performance.now() - t0;
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? NaN;
  return { rate: (done / elapsed) * 1000, done, allowed, p50: q(0.5), p99: q(0.99) };
}

async function main() {
  console.log(`\n=== redis: RedisStore vs peers (${await machineLine()})`);
  pin();
  const server = await startRedis();
  stopServer = () => server.stop();
  const { admin } = server;
  const version = /redis_version:(\S+)/.exec(await admin.info("server"))[1];
  console.log(
    `redis-server ${version} on 127.0.0.1:${server.port}${PINNED ? " (pinned to CPU 1, this process to CPU 0)" : ""}; ${RUNS} runs x ${SECONDS}s per case; limit ${LIMIT} per ${WINDOW_MS / 1000}s; ${KEYS.length} keys round-robin`,
  );

  const clients = new Map();
  const calls = new Map();
  for (const impl of IMPLS) {
    const c = new Redis(server.port, "127.0.0.1");
    await c.ping();
    clients.set(impl.name, c);
    calls.set(impl.name, impl.make(c));
  }
  const res = new Map(
    IMPLS.map((i) => [
      i.name,
      {
        r1: [],
        r256: [],
        p50_1: [],
        p99_1: [],
        p50_256: [],
        p99_256: [],
        cpu: [],
        cmds: [],
        sent: [],
        hotCpu: [],
        hotCmds: [],
        hotRate: [],
      },
    ]),
  );

  // Warm up every implementation (JIT, script cache) briefly.
  for (const impl of IMPLS) await drive(calls.get(impl.name), KEYS, 64, 300);

  for (let run = 0; run < RUNS; run++) {
    const order = run % 2 === 0 ? IMPLS : [...IMPLS].reverse();
    for (const impl of order) {
      const r = res.get(impl.name);
      const call = calls.get(impl.name);
      const one = await drive(call, KEYS, 1, SECONDS * 1000 * 0.5);
      r.r1.push(one.rate);
      r.p50_1.push(one.p50);
      r.p99_1.push(one.p99);
      const cpu0 = await redisCpuUs(admin);
      const st0 = await commandStats(admin);
      const many = await drive(call, KEYS, 256, SECONDS * 1000);
      const cpu1 = await redisCpuUs(admin);
      const st1 = await commandStats(admin);
      r.r256.push(many.rate);
      r.p50_256.push(many.p50);
      r.p99_256.push(many.p99);
      r.cpu.push((cpu1 - cpu0) / many.done);
      let cmds = 0;
      for (const [k, v] of Object.entries(st1)) if (k !== "info") cmds += v - (st0[k] ?? 0);
      r.cmds.push(cmds / many.done);
      global.gc?.();
    }
  }

  // Hot denied key: one key, far over its limit (every call denied).
  for (let run = 0; run < RUNS; run++) {
    for (const impl of IMPLS) {
      const r = res.get(impl.name);
      const call = calls.get(impl.name);
      const hot = [`hot:${impl.prefix}`];
      for (let i = 0; i < LIMIT + 5; i++) await call(hot[0]);
      const cpu0 = await redisCpuUs(admin);
      const st0 = await commandStats(admin);
      const d = await drive(call, hot, 64, SECONDS * 500);
      const cpu1 = await redisCpuUs(admin);
      const st1 = await commandStats(admin);
      let cmds = 0;
      for (const [k, v] of Object.entries(st1)) if (k !== "info") cmds += v - (st0[k] ?? 0);
      r.hotCpu.push((cpu1 - cpu0) / d.done);
      r.hotCmds.push(cmds / d.done);
      r.hotRate.push(d.rate);
      if (impl.prefix !== "none" && d.allowed > 0 && !impl.name.includes("minimal")) r.hotNote = `${d.allowed} admitted`;
    }
  }

  // Bytes per key, two ways, on 10,000 fresh keys per implementation that saw 3 requests each,
  // alone in a flushed Redis (so no other key expires meanwhile): MEMORY USAGE (the key, its value
  // and the main dict entry) and the growth of used_memory (also the expires entry and both dicts'
  // bucket arrays: what a key really costs).
  const bytes = new Map();
  const FRESH = 10_000;
  for (const impl of IMPLS) {
    if (impl.prefix === "none") continue;
    const call = calls.get(impl.name);
    await admin.flushall();
    await call("user:warm"); // scripts loaded, first key's dicts created
    const before = await usedMemory(admin);
    for (let i = 0; i < FRESH; i += 200) {
      await Promise.all(
        Array.from({ length: 200 }, async (_, j) => {
          for (let r = 0; r < 3; r++) await call(`user:${2_000_000 + i + j}`);
        }),
      );
    }
    const after = await usedMemory(admin);
    const found = [];
    let cursor = "0";
    do {
      const [next, keys] = await admin.scan(cursor, "MATCH", "*user:2*", "COUNT", 5000);
      cursor = next;
      for (const k of keys) if (found.length < 200) found.push(k);
    } while (cursor !== "0" && found.length < 200);
    const us = [];
    for (const k of found) us.push(Number(await admin.memory("USAGE", k)));
    bytes.set(impl.name, { usage: median(us), used: (after - before) / FRESH, sample: found[0] });
  }
  // Sliding log, full ring of 100 timestamps: bytes per stored timestamp.
  const logFull = new RateLimiter({
    algorithm: "sliding-log",
    limit: LIMIT,
    window: WINDOW_MS,
    store: new RedisStore({ client: admin, timeoutMs: 5000 }),
    namespace: "logfull",
  });
  for (let i = 0; i < LIMIT; i++) await logFull.consume("user:1");
  const logBytes = Number(await admin.memory("USAGE", "rk:{logfull:user:1}"));
  const rrlFull = new RollingRedisRateLimiter({ client: admin, namespace: "rrlfull", interval: WINDOW_MS, maxInInterval: LIMIT });
  for (let i = 0; i < LIMIT; i++) await rrlFull.limit("user:1");
  const rrlKey = (await admin.keys("rrlfull*"))[0];
  const rrlBytes = rrlKey ? Number(await admin.memory("USAGE", rrlKey)) : NaN;

  const base = res.get(IMPLS.find((i) => i.baseline)?.name ?? "");
  const baseRate = base ? median(base.r256) : NaN;
  const fixedCpu = median(res.get("ratekeeper fixed-window")?.cpu ?? [NaN]);
  // The best (least Redis CPU per decision) peer of each algorithm, for the "CPU vs best peer" column.
  const bestPeerCpu = new Map();
  for (const impl of IMPLS.filter((i) => i.peerOf)) {
    const c = median(res.get(impl.name).cpu);
    if (!(bestPeerCpu.get(impl.peerOf)?.cpu <= c)) bestPeerCpu.set(impl.peerOf, { cpu: c, name: impl.name });
  }
  const rows = IMPLS.map((impl) => {
    const r = res.get(impl.name);
    const b = bytes.get(impl.name);
    const peer = impl.ours ? bestPeerCpu.get(impl.algorithm) : undefined;
    return [
      impl.name,
      fmtRate(median(r.r1)),
      `${median(r.p50_1).toFixed(2)}/${median(r.p99_1).toFixed(2)}`,
      fmtRate(median(r.r256)),
      fmtRatio(median(r.r256), baseRate),
      `${median(r.p50_256).toFixed(2)}/${median(r.p99_256).toFixed(2)}`,
      median(r.cpu).toFixed(1),
      peer ? `${(median(r.cpu) / peer.cpu).toFixed(2)}x` : "-",
      median(r.cmds).toFixed(2),
      b === undefined ? "-" : String(b.usage),
      b === undefined ? "-" : b.used.toFixed(0),
    ];
  });
  const t = table(
    [
      "implementation",
      "dec/s @1",
      "p50/p99 ms @1",
      "dec/s @256",
      "vs rlflx",
      "p50/p99 ms @256",
      "Redis CPU us/dec",
      "CPU vs best peer",
      "Redis cmds/dec",
      "MEMORY USAGE B/key",
      "used_memory B/key",
    ],
    rows,
  );
  console.log(`\nMany keys (${KEYS.length}, mostly admitted):\n${t.text}`);
  console.log(
    `"CPU vs best peer": Redis CPU per decision over that of the peer with the least for the same algorithm (${[...bestPeerCpu].map(([a, p]) => `${a}: ${p.name}`).join("; ")}); gcra has no peer here.`,
  );
  const hotRows = IMPLS.map((impl) => {
    const r = res.get(impl.name);
    return [impl.name, fmtRate(median(r.hotRate)), median(r.hotCpu).toFixed(1), median(r.hotCmds).toFixed(2), r.hotNote ?? ""];
  });
  const t2 = table(["implementation", "dec/s @64", "Redis CPU us/dec", "Redis cmds/dec", "note"], hotRows);
  console.log(`\nOne hot key, far over its limit (every call denied):\n${t2.text}`);
  const logCpu = median(res.get("ratekeeper sliding-log")?.cpu ?? [NaN]);
  const summary = [
    `sliding log, full ring of ${LIMIT}: ${logBytes} bytes = ${(logBytes / LIMIT).toFixed(2)} bytes per stored timestamp (rolling-rate-limiter's sorted set: ${rrlBytes} bytes = ${(rrlBytes / LIMIT).toFixed(2)})`,
    `sliding log Redis CPU per decision / fixed window's: ${(logCpu / fixedCpu).toFixed(2)}x`,
  ];
  console.log(`\n${summary.join("\n")}`);
  if (MARKDOWN) console.log(`\n${t.markdown}\n\n${t2.markdown}\n\n- ${summary.join("\n- ")}\n`);

  for (const c of clients.values()) c.disconnect();
  await server.stop();
}

let stopServer;
main().catch(async (e) => {
  console.error(e);
  await stopServer?.();
  process.exit(1);
});
