// Bench section "overrides": checks per second of the decision service with 1,000,000 per-key
// overrides stored, next to the same service with none, in the same run and under the same load
// (the in-memory cache should keep the ratio above 0.9: overrides must not slow the hot path).
//
// Variants (the same build, the same rules file, the memory request store):
//   - none:  `ratekeeper serve` without --overrides
//   - empty: with --overrides sqlite:<empty file>      (the cache is there, holds nothing)
//   - 1M:    with --overrides sqlite:<1,000,000 rows>  (every key the load sends has an override)
// The 1M file is written by `ratekeeper overrides import` from a generated JSON-lines file (its
// time is reported too), and the service loads it all at start (load time and RSS reported).
// Overrides and the rule carry the same policy (fixed window, far above the load), so each check
// does the same limiter work and what differs is the override lookup path.
//
// Method: the three services run side by side, each pinned to CPU 0 (taskset); the load generator
// (wrk, a Lua script POSTing /v1/check for one `user_id` descriptor drawn from `--keys` ids spread
// over the million) runs pinned to CPU 1. Every round measures each variant once for `--duration`
// seconds, in a rotating order; the table quotes the median checks/s over `--runs` rounds, and the
// median of the per-round ratios to `none` (so a noisy neighbour slows both sides of a ratio).
// After each measurement one check is made to confirm what decided (override vs rule).
//
// A second table measures the same thing without HTTP: DecisionService.decide() in this process
// with the same 1,000,000-override cache vs none (alternating 0.5 s samples), which isolates the
// lookup's cost from the network stack's noise.
//
// Usage: node bench/overrides.js [--runs 11] [--duration 3] [--connections 50] [--overrides 1000000]
//                                [--keys 10000] [--markdown]
// (`npm run bench -- overrides` runs it through bench/run.js; needs wrk on PATH.)

// Longer than the ~350 lines of a source file, and its main() longer than 60, on purpose: a
// section is one script a reader follows top to bottom (its variants, how each is started and
// loaded, the table it prints), like a lab protocol; the parts sections share (timing, statistics,
// formatting, redis-server) are in bench/lib/.

import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { once } from "node:events";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fmtRate, fmtSpread, machineLine, table } from "./lib/format.js";
import { median, summarize } from "./lib/stats.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
};
const RUNS = Number(opt("--runs", 11));
const DURATION_S = Number(opt("--duration", 3));
const CONNECTIONS = Number(opt("--connections", 50));
const N_OVERRIDES = Number(opt("--overrides", 1_000_000));
const N_KEYS = Math.min(Number(opt("--keys", 10_000)), N_OVERRIDES);
const MARKDOWN = args.includes("--markdown");

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const CLI = path.join(ROOT, "packages/server/dist/cli.js");
const HUGE = 1_000_000_000;
const POLICY = { algorithm: "fixed-window", limit: HUGE, window: "1m" };

if (spawnSync("wrk", ["--version"]).error) {
  console.log("overrides: skipped (wrk is not on PATH)");
  process.exit(0);
}

const dir = mkdtempSync(path.join(tmpdir(), "rk-bench-overrides-"));
const children = new Set();
const cleanup = () => {
  for (const c of children) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
};
process.on("exit", cleanup);
process.on("SIGINT", () => process.exit(130));
process.on("SIGTERM", () => process.exit(143));

/** A user id for load key `i`: spread over the whole million (so pages and maps are not all hot). */
const userId = (i) => (i * 99_991) % N_OVERRIDES;

function pin(pid, cpu) {
  return spawnSync("taskset", ["-cp", String(cpu), String(pid)], { stdio: "ignore" }).status === 0;
}

const CLK_TCK = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** CPU time (user + system, ms) a process has used so far, from /proc (Linux); NaN elsewhere. */
function cpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // proc(5) fields 14 and 15 (utime, stime), in clock ticks: indexes 11 and 12 after the name.
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
  } catch {
    return NaN;
  }
}

function rssMiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Math.round(Number(m[1]) / 1024) : NaN;
  } catch {
    return NaN;
  }
}

async function writeOverridesFile(file) {
  const out = createWriteStream(file);
  const limits = JSON.stringify([POLICY]);
  let chunk = "";
  for (let i = 0; i < N_OVERRIDES; i++) {
    chunk += `{"domain":"api","key":"user_id=${i}","limits":${limits}}\n`;
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await once(out, "drain");
      chunk = "";
    }
  }
  out.end(chunk);
  await once(out, "finish");
}

function runCli(argv) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [CLI, ...argv], { encoding: "utf8", env: { ...process.env, RATEKEEPER_OVERRIDES: "" } });
  if (r.status !== 0) throw new Error(`ratekeeper ${argv.join(" ")} failed (${r.status}):\n${r.stderr}`);
  return performance.now() - t0;
}

async function startService(label, extra) {
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      CLI,
      "serve",
      "--config",
      path.join(dir, "rules.yaml"),
      "--port",
      "0",
      "--grpc-port",
      "0",
      "--host",
      "127.0.0.1",
      "--no-watch",
      ...extra,
    ],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LOG_LEVEL: "info", RATEKEEPER_OVERRIDES: "", RATEKEEPER_ADMIN_TOKEN: "" },
    },
  );
  children.add(child);
  pin(child.pid, 0);
  let buf = "";
  const lines = [];
  const port = await new Promise((resolve, reject) => {
    const onData = (d) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        lines.push(line);
        if (line.includes('"listening"')) resolve(JSON.parse(line).httpPort);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${label}: service exited (${code}) before listening:\n${lines.join("\n")}`)));
  });
  return { label, port, pid: child.pid, startMs: performance.now() - t0, stop: () => child.kill("SIGKILL") };
}

function wrkScript(file) {
  // Each request: one `user_id` descriptor, drawn at random from N_KEYS ids spread over the million.
  writeFileSync(
    file,
    `wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local bodies = {}
for i = 0, ${N_KEYS - 1} do
  local id = (i * 99991) % ${N_OVERRIDES}
  bodies[i + 1] = '{"domain":"api","descriptors":[[{"key":"user_id","value":"' .. id .. '"}]]}'
end
math.randomseed(42)
request = function()
  return wrk.format(nil, "/v1/check", nil, bodies[math.random(1, ${N_KEYS})])
end
`,
  );
}

function wrk(port, seconds, script) {
  return new Promise((resolve, reject) => {
    const child = spawn("wrk", ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "-s", script, `http://127.0.0.1:${port}/`], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.add(child);
    pin(child.pid, 1);
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.once("exit", (code) => {
      children.delete(child);
      if (code !== 0) return reject(new Error(`wrk exited ${code}:\n${out}`));
      const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
      const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
      const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
      const errors = /Socket errors:.*/.exec(out)?.[0];
      resolve({ rps, requests, non2xx, errors });
    });
  });
}

async function whoDecided(port) {
  const res = await fetch(`http://127.0.0.1:${port}/v1/check`, {
    method: "POST",
    body: JSON.stringify({ domain: "api", descriptors: [[{ key: "user_id", value: String(userId(N_KEYS - 1)) }]] }),
  });
  const body = await res.json();
  return body.statuses?.[0]?.explain?.source;
}

async function main() {
  console.log(`\n=== overrides: checks/s with ${fmtRate(N_OVERRIDES)} overrides stored vs none (same run)`);
  console.log(await machineLine());
  writeFileSync(
    path.join(dir, "rules.yaml"),
    `domains:\n  - domain: api\n    descriptors:\n      - key: user_id\n        algorithm: fixed-window\n        limit: ${HUGE}\n        window: 1m\n`,
  );
  const jsonl = path.join(dir, "overrides.jsonl");
  await writeOverridesFile(jsonl);
  const full = `sqlite:${path.join(dir, "full.db")}`;
  const empty = `sqlite:${path.join(dir, "empty.db")}`;
  const importMs = runCli(["overrides", "import", jsonl, "--overrides", full]);
  runCli(["overrides", "export", path.join(dir, "empty-export.jsonl"), "--overrides", empty]); // creates the empty schema
  console.log(
    `import: ${N_OVERRIDES} lines through \`ratekeeper overrides import\` in ${(importMs / 1000).toFixed(1)} s (${fmtRate(N_OVERRIDES / (importMs / 1000))} lines/s)`,
  );
  rmSync(jsonl);

  const services = [
    await startService("none", []),
    await startService("empty", ["--overrides", empty]),
    await startService(`${fmtRate(N_OVERRIDES)} overrides`, ["--overrides", full]),
  ];
  const [none, , million] = services;
  const expected = { [services[0].label]: "rule", [services[1].label]: "rule", [services[2].label]: "override" };
  for (const s of services) console.log(`${s.label.padEnd(14)} ready in ${(s.startMs / 1000).toFixed(1)} s, RSS ${rssMiB(s.pid)} MiB`);

  const script = path.join(dir, "load.lua");
  wrkScript(script);
  for (const s of services) await wrk(s.port, 1, script); // warm-up (JIT, keys in the request store)

  const rps = new Map(services.map((s) => [s.label, []]));
  const ratios = new Map(services.map((s) => [s.label, []]));
  // CPU µs the service spent per check: far less sensitive than checks/s to other jobs on the
  // machine taking turns on the cores (a check costs the same CPU whether or not it waited).
  const cpuPerCheck = new Map(services.map((s) => [s.label, []]));
  const cpuRatios = new Map(services.map((s) => [s.label, []]));
  const problems = [];
  for (let round = 0; round < RUNS; round++) {
    const order = services.map((_, i) => services[(i + round) % services.length]);
    if (round % 2 === 1) order.reverse();
    const got = new Map();
    const gotCpu = new Map();
    for (const s of order) {
      const cpu0 = cpuMs(s.pid);
      const r = await wrk(s.port, DURATION_S, script);
      const usPerCheck = ((cpuMs(s.pid) - cpu0) * 1000) / r.requests;
      gotCpu.set(s.label, usPerCheck);
      cpuPerCheck.get(s.label).push(usPerCheck);
      if (r.non2xx > 0 || r.errors) problems.push(`${s.label}: ${r.non2xx} non-2xx, ${r.errors ?? "no socket errors"}`);
      const source = await whoDecided(s.port);
      if (source !== expected[s.label]) problems.push(`${s.label}: decided by ${source}, expected ${expected[s.label]}`);
      got.set(s.label, r.rps);
      rps.get(s.label).push(r.rps);
    }
    for (const s of services) {
      ratios.get(s.label).push(got.get(s.label) / got.get(none.label));
      cpuRatios.get(s.label).push(gotCpu.get(none.label) / gotCpu.get(s.label));
    }
    console.log(
      `round ${round + 1}/${RUNS}: ${services.map((s) => `${s.label} ${fmtRate(got.get(s.label))}/s ${gotCpu.get(s.label).toFixed(1)} µs`).join(", ")}`,
    );
  }

  const rows = services.map((s) => {
    const st = summarize(rps.get(s.label));
    const cpu = summarize(cpuPerCheck.get(s.label));
    return [
      s.label,
      `${fmtRate(st.median)}/s`,
      fmtSpread(st.spread),
      `${median(ratios.get(s.label)).toFixed(3)}`,
      `${cpu.median.toFixed(1)} µs`,
      fmtSpread(cpu.spread),
      `${median(cpuRatios.get(s.label)).toFixed(3)}`,
      `${rssMiB(s.pid)} MiB`,
    ];
  });
  const t = table(
    [
      "service",
      "checks/s (median)",
      "spread",
      "checks/s ratio to none",
      "service CPU per check",
      "spread",
      "CPU ratio (none / this)",
      "RSS after",
    ],
    rows,
  );
  console.log(`\n${t.text}`);
  const ratio = median(ratios.get(million.label));
  const cpuRatio = median(cpuRatios.get(million.label));
  console.log(
    `\n${million.label} / none: checks/s ratio ${ratio.toFixed(3)}, CPU-per-check ratio ${cpuRatio.toFixed(3)} (target > 0.9): ${ratio > 0.9 ? "ok" : "BELOW TARGET"}`,
  );
  if (problems.length) console.log(`problems:\n  ${problems.join("\n  ")}`);
  console.log(
    `(${RUNS} rounds x ${DURATION_S} s per variant, wrk -t1 -c${CONNECTIONS}, POST /v1/check over ${N_KEYS} keys; services on CPU 0, wrk on CPU 1)`,
  );
  if (MARKDOWN) console.log(`\n${t.markdown}`);
  for (const s of services) s.stop();
  await inProcess(full);
  if (problems.length) process.exitCode = 1;
}

await main();

/** decide() per second in this process: the 1M-override cache vs none vs an empty cache. */
async function inProcess(fullUrl) {
  const { MemoryStore } = await import("ratekeeper");
  const server = await import("../packages/server/dist/index.js");
  const rules = server.loadRulesFile(path.join(dir, "rules.yaml"));
  const fullStore = await server.openOverrideStore(fullUrl);
  const emptyStore = await server.openOverrideStore(`sqlite:${path.join(dir, "empty.db")}`);
  const quiet = { purgeIntervalMs: 0, resyncIntervalMs: 0 };
  const [fullCache, emptyCache] = [await server.OverrideCache.start(fullStore, quiet), await server.OverrideCache.start(emptyStore, quiet)];
  const variants = [
    ["none", new server.DecisionService({ store: new MemoryStore(), rules })],
    ["empty", new server.DecisionService({ store: new MemoryStore(), rules, overrides: emptyCache })],
    [`${fmtRate(N_OVERRIDES)} overrides`, new server.DecisionService({ store: new MemoryStore(), rules, overrides: fullCache })],
  ];
  const inputs = Array.from({ length: N_KEYS }, (_, i) => ({
    domain: "api",
    descriptors: [[{ key: "user_id", value: String(userId(i)) }]],
  }));
  const per = new Map(variants.map(([l]) => [l, []]));
  const ratios = new Map(variants.map(([l]) => [l, []]));
  // Decisions per CPU second of this process (process.cpuUsage), not per wall second: time the
  // scheduler gives other jobs on the shared machine does not count against either variant.
  const sample = async (svc) => {
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    let n = 0;
    while (performance.now() - t0 < 500) {
      for (let j = 0; j < 1000; j++) await svc.decide(inputs[(n + j) % N_KEYS]);
      n += 1000;
    }
    const c = process.cpuUsage(c0);
    return n / ((c.user + c.system) / 1e6);
  };
  for (const [, svc] of variants) await sample(svc); // warm-up
  for (let round = 0; round < RUNS * 2; round++) {
    const order = variants.map((_, i) => variants[(i + round) % variants.length]);
    const got = new Map();
    for (const [label, svc] of order) got.set(label, await sample(svc));
    for (const [label] of variants) {
      per.get(label).push(got.get(label));
      ratios.get(label).push(got.get(label) / got.get("none"));
    }
  }
  const rows = variants.map(([label]) => {
    const st = summarize(per.get(label));
    return [
      label,
      `${fmtRate(st.median)}/s`,
      fmtSpread(st.spread),
      `${(1e6 / st.median).toFixed(2)} µs`,
      median(ratios.get(label)).toFixed(3),
    ];
  });
  const t = table(["in-process decide()", "decisions per CPU-second (median)", "spread", "CPU per decision", "ratio to none"], rows);
  console.log(`\n${t.text}\n(${RUNS * 2} rounds x 0.5 s, alternating; one process, memory request store, ${N_KEYS} keys)`);
  if (MARKDOWN) console.log(`\n${t.markdown}`);
  fullCache.close();
  emptyCache.close();
  await fullStore.close();
  await emptyStore.close();
}
