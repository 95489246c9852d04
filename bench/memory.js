// Bench section "memory": decisions per second of the embedded MemoryStore, every algorithm,
// next to the in-process peers measured in the same run:
//   - rate-limiter-flexible's RateLimiterMemory (`consume`, rejects on a denial): the baseline of the ratios
//   - express-rate-limit's MemoryStore (`increment`; the middleware compares totalHits to its limit)
//   - the `limiter` package's TokenBucket (`tryRemoveTokens`; one bucket per key, in a Map, as a user would)
//   - an empty async function: the ceiling of any awaited call on this machine; and one that reads
//     Date.now(): the ceiling of any limiter that reads the clock once per decision (all of these do)
//
// Scenarios: one hot key, or 100,000 keys visited round-robin (all present before timing); traffic
// all allowed (limits far above the load) or all denied (limit 1 per hour, already spent).
// Every call is awaited in turn, as a request handler would; a third table times the synchronous
// calls (our consumeNow, limiter) without await, each against its own kind. See docs/benchmarks/memory.md.
//
// Usage: node --expose-gc bench/memory.js [--runs 7] [--sample-ms 250] [--only <our algorithm, substring>]
//          [--group <scenario substring>] [--mixed] [--no-alloc] [--only-alloc] [--markdown]
//          [--scattered: also 100,000 keys visited in no order] [--procs 1]
// Each of our algorithms is measured in its own child process, next to the peers (--mixed: all of
// them in one process); allocation is measured in further children with a large new space.
// --procs N: N child processes per algorithm, run in N rounds (each round every algorithm once, in
// a rotated order), their samples pooled: one process's draw no longer decides a row.
// (`npm run bench -- memory` runs it through bench/run.js with --expose-gc.)

// Longer than the ~350 lines of a source file, and its longest functions longer than 60, on purpose: a
// section is one script a reader follows top to bottom (its variants, how each is started and
// loaded, the table it prints), like a lab protocol; the parts sections share (timing, statistics,
// formatting, redis-server) are in bench/lib/.

import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { MemoryStore as ErlMemoryStore } from "express-rate-limit";
import { TokenBucket } from "limiter";
import { RateLimiter, MemoryStore } from "ratekeeper";
import { runCases, bytesPerCall, bytesPerCallSync } from "./lib/measure.js";
import { summarize } from "./lib/stats.js";
import { fmtRate, fmtRatio, fmtSpread, table, machineLine } from "./lib/format.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
};
const RUNS = Number(opt("--runs", process.env.BENCH_RUNS ?? 7));
const SAMPLE_MS = Number(opt("--sample-ms", process.env.BENCH_SAMPLE_MS ?? 250));
const ONLY = opt("--only", "");
const ONLY_GROUP = opt("--group", ""); // e.g. "100,000 keys" or "hot key, allowed"
const MARKDOWN = args.includes("--markdown");
const HOUR_MS = 3_600_000;
const MANY = 100_000;

const SCATTERED = args.includes("--scattered");
// How many child processes measure each algorithm (their samples pooled). Over 100,000 keys one
// process's three samples can all land in a slow stretch of this shared 2-core VM, on ours and
// the peers alike (docs/benchmarks/memory.md, "token bucket at half GCRA's rate"); N processes
// spread in time give each algorithm N such draws.
const PROCS = Math.max(1, Math.floor(Number(opt("--procs", "1"))) || 1);

const KEYS = { hot: ["hot-key"], many: Array.from({ length: MANY }, (_, i) => `user:${i}`) };
// --scattered: the same 100,000 keys, inserted in order but visited in a stride (i x 7919 mod
// 100,000; 7919 is prime to 100,000), so that consecutive calls touch objects far apart in memory,
// as real traffic does; the round-robin order lets the CPU prefetch (docs/benchmarks/memory.md).
KEYS.scattered = Array.from({ length: MANY }, (_, i) => KEYS.many[(i * 7919) % MANY]);
/** The keys each scenario inserts before timing, in the order it inserts them. */
const PREFILL = { hot: KEYS.hot, many: KEYS.many, scattered: KEYS.many };
const GROUP_KEYS = { hot: "1 hot key", many: "100,000 keys", scattered: "100,000 keys in no order" };

/** Our algorithms, as table rows: label and the algorithm-specific part of the spec. */
const OURS = [
  ["fixed-window", { algorithm: "fixed-window" }],
  ["sliding-log", { algorithm: "sliding-log" }],
  ["sliding-window buckets=1", { algorithm: "sliding-window", buckets: 1 }],
  ["sliding-window buckets=10", { algorithm: "sliding-window", buckets: 10 }],
  ["token-bucket", { algorithm: "token-bucket" }],
  ["leaky-bucket police", { algorithm: "leaky-bucket", mode: "police" }],
  ["leaky-bucket shape", { algorithm: "leaky-bucket", mode: "shape" }],
  ["gcra", { algorithm: "gcra" }],
];
const RLF = "rate-limiter-flexible RateLimiterMemory";
const ERL = "express-rate-limit MemoryStore.increment";
const LIM = "limiter TokenBucket.tryRemoveTokens";
const NOOP = "empty async function (ceiling)";
const NOOP_NOW = "empty async function + Date.now()";
// The same calls without `await`: ratekeeper's synchronous `consumeNow` (the memory store answers
// in the call) against limiter's synchronous `tryRemoveTokens`, each calling convention against
// its own kind (an awaited call costs about 50 ns here by itself, see the ceilings).
const LIM_SYNC = "limiter TokenBucket.tryRemoveTokens, not awaited";
const NOOP_SYNC = "empty function, not awaited (ceiling)";
const syncLabel = (label) => `${label}: consumeNow, not awaited`;
const SYNC_ROWS = new Set([LIM_SYNC, NOOP_SYNC]);

/**
 * The limit for a scenario. Allowed traffic: far above what the loop can send (a billion per hour);
 * the sliding log keeps one timestamp per unit, so it gets a short window instead: on the hot key
 * a million (its largest limit) per 25 ms, 40M/s, above even the synchronous `consumeNow` loop's
 * ~30M/s (the ring holds what was sent in the last 25 ms, read and written in order), and 100 per
 * 100 ms per key over 100,000 keys (each key is visited every 100,000 calls). Denied traffic: 1 per
 * hour, spent before timing.
 */
function ourSpec(base, keys, traffic) {
  if (traffic === "denied") return { ...base, limit: 1, window: HOUR_MS };
  if (base.algorithm === "sliding-log")
    return keys === "hot" ? { ...base, limit: 1_000_000, window: 25 } : { ...base, limit: 100, window: 100 };
  if (base.algorithm === "gcra") return { ...base, limit: 1e9, window: HOUR_MS, burst: 1e9 - 1 };
  return { ...base, limit: 1e9, window: HOUR_MS };
}

const LIMIT = { allowed: 1e9, denied: 1 };

async function prefill(call, keys, traffic) {
  // Every key present before timing; denied traffic spends the one unit of each key first.
  for (const k of keys) {
    try {
      await call(k);
    } catch {
      /* rate-limiter-flexible rejects on denial */
    }
  }
  void traffic;
}

/** Runs `call` on a few keys and returns an error message if any outcome was not `traffic`. */
async function checkWith(isAllowed, call, keys, traffic) {
  for (let i = 0; i < 100; i++) {
    const allowed = await isAllowed(call, keys[(i * 997) % keys.length]);
    if (allowed !== (traffic === "allowed")) return `expected ${traffic} traffic, got a decision with allowed=${allowed}`;
  }
  return undefined;
}

/** limiter's TokenBucket per key, in a Map, as a user would keep them; `size` per hour. */
function limiterCall(size) {
  const buckets = new Map();
  return (key) => {
    let b = buckets.get(key);
    if (b === undefined) {
      b = new TokenBucket({ bucketSize: size, tokensPerInterval: size, interval: "hour" });
      b.content = size; // it starts empty; a new key should start with a full allowance like the others
      buckets.set(key, b);
    }
    return b.tryRemoveTokens(1);
  };
}

/** The cases for `ours` (a subset of OURS), the peers and the ceilings, in every scenario. */
function buildCases(ours) {
  const cases = [];
  for (const keys of SCATTERED ? ["hot", "many", "scattered"] : ["hot", "many"]) {
    for (const traffic of ["allowed", "denied"]) {
      const group = `${GROUP_KEYS[keys]}, ${traffic}`;
      const ks = KEYS[keys];
      const add = (impl, c) => cases.push({ id: `${group}|${impl}`, group, impl, keys: ks, ...c });
      for (const [label, base] of ours) {
        let store;
        add(label, {
          setup: async () => {
            store = new MemoryStore();
            const limiter = new RateLimiter({ ...ourSpec(base, keys, traffic), store });
            const call = (key) => limiter.consume(key);
            await prefill(call, PREFILL[keys], traffic);
            return call;
          },
          check: (call, k) => checkWith(async (c, key) => (await c(key)).allowed, call, k, traffic),
          // Drop the instance too: the case's closures live as long as the process, and a store
          // still holding its 100,000 keys would weigh on the collections of every later group.
          teardown: () => {
            store.close();
            store = undefined;
          },
        });
        let syncStore;
        add(syncLabel(label), {
          sync: true,
          setup: async () => {
            syncStore = new MemoryStore();
            const limiter = new RateLimiter({ ...ourSpec(base, keys, traffic), store: syncStore });
            const call = (key) => limiter.consumeNow(key);
            await prefill(call, PREFILL[keys], traffic);
            return call;
          },
          check: (call, k) => checkWith(async (c, key) => c(key).allowed, call, k, traffic),
          teardown: () => {
            syncStore.close();
            syncStore = undefined;
          },
        });
      }
      let rlf;
      add(RLF, {
        setup: async () => {
          rlf = new RateLimiterMemory({ points: LIMIT[traffic], duration: HOUR_MS / 1000 });
          const call = (key) => rlf.consume(key);
          await prefill(call, PREFILL[keys], traffic);
          return call;
        },
        check: (call, k) =>
          checkWith(
            (c, key) =>
              c(key).then(
                () => true,
                () => false,
              ),
            call,
            k,
            traffic,
          ),
        // Each key holds an unref'd one-hour timer that pins the whole map: clear them.
        teardown: () => {
          for (const rec of rlf._memoryStorage._storage.values()) clearTimeout(rec.timeoutId);
          rlf._memoryStorage._storage.clear();
          rlf = undefined;
        },
      });
      let erl;
      add(ERL, {
        setup: async () => {
          erl = new ErlMemoryStore();
          erl.init({ windowMs: HOUR_MS });
          const call = (key) => erl.increment(key);
          await prefill(call, PREFILL[keys], traffic);
          return call;
        },
        check: (call, k) => checkWith(async (c, key) => (await c(key)).totalHits <= LIMIT[traffic], call, k, traffic),
        teardown: () => {
          erl.shutdown();
          erl = undefined;
        },
      });
      for (const [label, sync] of [
        [LIM, false],
        [LIM_SYNC, true],
      ]) {
        add(label, {
          sync,
          setup: async () => {
            const call = limiterCall(LIMIT[traffic]);
            await prefill(call, PREFILL[keys], traffic);
            return call;
          },
          check: (call, k) => checkWith(async (c, key) => c(key), call, k, traffic),
        });
      }
      add(NOOP, {
        setup: async () => async function noop(_key) {},
      });
      add(NOOP_SYNC, {
        sync: true,
        setup: async () =>
          function noopSync(_key) {
            return true;
          },
      });
      add(NOOP_NOW, {
        setup: async () =>
          async function noopNow(_key) {
            return Date.now();
          },
      });
    }
  }
  return cases.filter((c) => !ONLY_GROUP || c.group.includes(ONLY_GROUP));
}

/** In a child: measures `ours` next to the peers and prints the results as one JSON line. */
async function child(ours) {
  const cases = buildCases(ours);
  const t0 = Date.now();
  const res = await runCases(cases, {
    runs: RUNS,
    sampleMs: SAMPLE_MS,
    log: (s) => console.error(`  [${ours.map(([l]) => l).join(", ") || "peers"}] ${s} (${((Date.now() - t0) / 1000).toFixed(0)} s)`),
  });
  process.stdout.write(`RESULT ${JSON.stringify(Object.fromEntries(res))}\n`);
}

/** Runs this file as a child with `extra` arguments; returns its parsed RESULT line. */
function runChild(extra, nodeFlags = ["--expose-gc"]) {
  const self = fileURLToPath(import.meta.url);
  const pass = [
    "--runs",
    String(RUNS),
    "--sample-ms",
    String(SAMPLE_MS),
    ...(ONLY_GROUP ? ["--group", ONLY_GROUP] : []),
    ...(SCATTERED ? ["--scattered"] : []),
  ];
  const r = spawnSync(process.execPath, [...nodeFlags, self, ...extra, ...pass], {
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
    maxBuffer: 64 * 2 ** 20,
  });
  const line = r.stdout.split("\n").find((l) => l.startsWith("RESULT "));
  if (r.status !== 0 || !line) throw new Error(`bench child ${extra.join(" ")} failed (exit ${r.status}): ${r.stdout.slice(-2000)}`);
  return JSON.parse(line.slice("RESULT ".length));
}

/**
 * Runs `measure(label)` (one child) PROCS times per algorithm of `ours`, in rounds, each round in
 * an order rotated by one; returns one result per algorithm, each id's samples pooled.
 */
function inRounds(ours, measure) {
  const per = new Map(ours.map(([label]) => [label, []]));
  for (let round = 0; round < PROCS; round++) {
    const shift = round % ours.length;
    for (const [label] of [...ours.slice(shift), ...ours.slice(0, shift)]) per.get(label).push(measure(label));
  }
  return ours.map(([label]) => pooled(per.get(label)));
}

/** Child results (id -> {cpu, wall, problems}) merged: every id's samples pooled and summarized again. */
function pooled(results) {
  if (results.length === 1) return results[0];
  const out = {};
  for (const id of new Set(results.flatMap((r) => Object.keys(r)))) {
    const rs = results.filter((r) => r[id]).map((r) => r[id]);
    const metric = (m) => summarize(rs.flatMap((r) => r[m].samples));
    out[id] = { cpu: metric("cpu"), wall: metric("wall"), problems: [...new Set(rs.flatMap((r) => r.problems))] };
  }
  return out;
}

async function throughput() {
  const mixed = args.includes("--mixed");
  const ours = OURS.filter(([label]) => !ONLY || label.includes(ONLY));
  console.log(`${await machineLine()}`);
  console.log(
    `${RUNS} recorded runs per case, ~${SAMPLE_MS} ms each, alternating with the peers; ` +
      (mixed
        ? "every algorithm in one process (--mixed)"
        : PROCS > 1
          ? `${PROCS} processes per algorithm of ours, in rounds, each also measuring the peers (samples pooled over an algorithm's processes, ratios to the peers of the same processes)`
          : "one process per algorithm of ours, each also measuring the peers (ratios are within that process)") +
      "\n",
  );
  // Each of our algorithms runs in its own process by default, as in an application that uses one
  // or two: in one process running all eight, V8 sees every algorithm at the same call sites and
  // optimizes for none (`--mixed` measures that case).
  const childOf = (label) => ["--child", String(OURS.findIndex(([l]) => l === label))];
  const parts = mixed ? [runChild(["--child", ours.map((_, i) => i).join(",")])] : inRounds(ours, (label) => runChild(childOf(label)));
  const cases = buildCases(ours);
  const groups = [...new Set(cases.map((c) => c.group))];
  const impls = [...new Set(cases.map((c) => c.impl))];
  const isOurs = (impl) => ours.some(([l]) => l === impl || syncLabel(l) === impl);
  const peers = impls.filter((impl) => !isOurs(impl) && !SYNC_ROWS.has(impl));
  const syncPeers = impls.filter((impl) => SYNC_ROWS.has(impl));

  // Ours: the process that measured it. Peers: every process's samples pooled.
  const get = (g, impl, metric) => {
    const id = `${g}|${impl}`;
    const owner = parts.find((p) => p[id] && isOurs(impl));
    if (owner) return { r: owner[id][metric], base: owner[`${g}|${RLF}`]?.[metric], problems: owner[id].problems };
    const pooled = (im) => summarize(parts.flatMap((p) => p[`${g}|${im}`]?.[metric].samples ?? []));
    return { r: pooled(impl), base: pooled(RLF), problems: parts.flatMap((p) => p[id]?.problems ?? []) };
  };
  // The best peer of a scenario, measured in the same process as `impl` (ours) or pooled (peers):
  // the faster of express-rate-limit's increment and limiter's TokenBucket (rate-limiter-flexible
  // is far behind both); for a call not awaited, limiter's TokenBucket not awaited (the only
  // synchronous peer).
  const bestPeer = (g, impl, metric) => {
    const id = (im) => `${g}|${im}`;
    const owner = parts.find((p) => p[`${g}|${impl}`] && isOurs(impl));
    const rate = (im) =>
      owner ? owner[id(im)]?.[metric]?.median : summarize(parts.flatMap((p) => p[id(im)]?.[metric].samples ?? [])).median;
    if (SYNC_ROWS.has(impl) || ours.some(([l]) => syncLabel(l) === impl)) return { median: rate(LIM_SYNC), name: "limiter" };
    const erl = rate(ERL);
    const lim = rate(LIM);
    return erl >= lim ? { median: erl, name: "express-rate-limit" } : { median: lim, name: "limiter" };
  };
  const render = (metric, sync = false) => {
    const header = [
      `decisions/s, ${metric === "cpu" ? "CPU" : "wall"} time (median ±half-range)`,
      ...groups.flatMap((g) => (sync ? [g, "vs best peer"] : [g, "vs best peer", "vs rlf"])),
    ];
    const rows = (sync ? [...ours.map(([l]) => syncLabel(l)), ...syncPeers] : [...ours.map(([l]) => l), ...peers]).map((impl) => [
      impl,
      ...groups.flatMap((g) => {
        const { r, base } = get(g, impl, metric);
        if (!r || !(r.samples.length > 0)) return sync ? ["", ""] : ["", "", ""];
        const cells = [`${fmtRate(r.median)} ${fmtSpread(r.spread)}`, fmtRatio(r.median, bestPeer(g, impl, metric).median)];
        return sync ? cells : [...cells, fmtRatio(r.median, base?.median)];
      }),
    ]);
    return table(header, rows);
  };
  const cpuTable = render("cpu");
  const wallTable = render("wall");
  console.log("Per second of CPU time (steadier on a shared machine):");
  console.log(cpuTable.text);
  console.log("\nPer second of wall-clock time (what a caller sees; noisier here):");
  console.log(wallTable.text);
  const syncTable = render("cpu", true);
  console.log("\nNot awaited: ratekeeper's synchronous consumeNow against limiter's synchronous call, CPU time:");
  console.log(syncTable.text);
  if (MARKDOWN) console.log(`\n${cpuTable.markdown}\n\n${wallTable.markdown}\n\n${syncTable.markdown}\n`);

  // The aims: fixed window, token bucket and GCRA at least 1.5x the best peer in every scenario;
  // the sliding window and the sliding log within 1.3x of fixed window's cost (CPU time).
  const lines = [];
  for (const [label] of ours) {
    if (!["fixed-window", "token-bucket", "gcra"].includes(label)) continue;
    const ratios = groups.map((g) => {
      const { r } = get(g, label, "cpu");
      return r ? `${g} ${(r.median / bestPeer(g, label, "cpu").median).toFixed(2)}x` : `${g} -`;
    });
    lines.push(`${label} vs the best peer (aim >= 1.5x): ${ratios.join("; ")}`);
    const syncRatios = groups.map((g) => {
      const { r } = get(g, syncLabel(label), "cpu");
      return r ? `${g} ${(r.median / bestPeer(g, syncLabel(label), "cpu").median).toFixed(2)}x` : `${g} -`;
    });
    lines.push(`${label} consumeNow vs limiter, neither awaited: ${syncRatios.join("; ")}`);
  }
  const fixed = ours.find(([l]) => l === "fixed-window");
  for (const [label] of ours) {
    if (!fixed || !label.startsWith("sliding")) continue;
    const costs = groups.map((g) => {
      const a = get(g, label, "cpu").r;
      const f = get(g, "fixed-window", "cpu").r;
      return a && f ? `${g} ${(f.median / a.median).toFixed(2)}x` : `${g} -`;
    });
    lines.push(`${label} cost / fixed window's (aim <= 1.3x): ${costs.join("; ")}`);
  }
  if (lines.length > 0) console.log(`\n${lines.join("\n")}`);
  for (const g of groups)
    for (const impl of impls) for (const p of new Set(get(g, impl, "cpu").problems)) console.log(`WARNING ${g} | ${impl}: ${p}`);
}

/**
 * In a child with a 128 MB new space (so a batch of calls runs with no collection): bytes per
 * decision of one of our algorithms (`which` = its index) or of the peers (`which` = "peers").
 */
async function allocationChild(which) {
  const noopAsync = await bytesPerCall(async function noop(_key) {}, KEYS.hot);
  const rows = [];
  if (which !== "peers") {
    const [label, base] = OURS[Number(which)];
    const row = [label];
    for (const traffic of ["allowed", "denied"]) {
      const store = new MemoryStore();
      const limiter = new RateLimiter({ ...ourSpec(base, "hot", traffic), store });
      await limiter.consume(KEYS.hot[0]);
      const bound = limiter["bound"]; // the BoundStore: the synchronous part of the hot path
      const viaLimiter = await bytesPerCall((k) => limiter.consume(k), KEYS.hot);
      const sync = bytesPerCallSync((k) => bound.consume(k, 1, undefined), KEYS.hot);
      row.push(viaLimiter.toFixed(0), (viaLimiter - noopAsync).toFixed(0), sync.toFixed(0));
      store.close();
    }
    rows.push(row);
  } else {
    const peer = async (label, call, keys) => {
      const b = await bytesPerCall(call, keys);
      return [label, b.toFixed(0), (b - noopAsync).toFixed(0)];
    };
    const rlfA = new RateLimiterMemory({ points: 1e9, duration: 3600 });
    const rlfD = new RateLimiterMemory({ points: 1, duration: 3600 });
    const erl = new ErlMemoryStore();
    erl.init({ windowMs: HOUR_MS });
    const tb = new TokenBucket({ bucketSize: 1e9, tokensPerInterval: 1e9, interval: "hour" });
    tb.content = 1e9;
    rows.push(await peer(`${RLF} (allowed)`, (k) => rlfA.consume(k), KEYS.hot));
    rows.push(await peer(`${RLF} (denied)`, (k) => rlfD.consume(k), KEYS.hot));
    rows.push(await peer(ERL, (k) => erl.increment(k), KEYS.hot));
    rows.push(await peer(`limiter TokenBucket.tryRemoveTokens (one bucket)`, () => tb.tryRemoveTokens(1), KEYS.hot));
    rows.push([NOOP, noopAsync.toFixed(0), "0"]);
    rows.push(await peer(NOOP_NOW, async (_k) => Date.now(), KEYS.hot));
    erl.shutdown();
  }
  process.stdout.write(`RESULT ${JSON.stringify(rows)}\n`);
}

async function allocation() {
  const flags = ["--expose-gc", "--max-semi-space-size=128", "--min-semi-space-size=128"];
  const ours = OURS.map((o, i) => [o, i]).filter(([[label]]) => !ONLY || label.includes(ONLY));
  const rows = ours.flatMap(([, i]) => runChild(["--alloc", String(i)], flags));
  const peers = runChild(["--alloc", "peers"], flags);
  const t1 = table(
    [
      "bytes per decision, 1 hot key",
      "allowed: consume",
      "minus empty async",
      "BoundStore (sync)",
      "denied: consume",
      "minus empty async",
      "BoundStore (sync)",
    ],
    rows,
  );
  const t2 = table(["peers and ceilings, 1 hot key", "bytes per call", "minus empty async"], peers);
  console.log("\nAllocation: JS heap bytes per awaited call, each algorithm in its own process:");
  console.log(t1.text);
  console.log();
  console.log(t2.text);
  if (MARKDOWN) console.log(`\n${t1.markdown}\n\n${t2.markdown}\n`);
}

if (args.includes("--alloc")) {
  await allocationChild(opt("--alloc", "peers"));
} else if (args.includes("--child")) {
  const picked = opt("--child", "")
    .split(",")
    .filter((x) => x !== "")
    .map((i) => OURS[Number(i)]);
  await child(picked);
} else {
  if (!args.includes("--only-alloc")) await throughput();
  if (!args.includes("--no-alloc")) await allocation();
}
