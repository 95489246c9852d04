// Benchmark section "dashboard": what the dashboard costs the decision hot path, in the same run.
//
//   1. In process: DecisionService.decide() CPU time per decision with the Prometheus metrics
//      only, and with the metrics plus the dashboard's counters (the service's two observers),
//      on three workloads: admitted checks over 100k keys; one hot key denied on every check;
//      a flood of distinct keys each denied once (the worst case for the top-keys sketch).
//   2. The service as a process, with wrk on POST /v1/check (memory store): started with
//      --no-dashboard, with the dashboard on and nobody watching, and with a browser-like
//      client connected to /dashboard/api/events; server CPU per check and checks/s.
//
//   npm run bench -- dashboard
//   npm run bench -- dashboard -- --runs 7 --duration 8 --markdown
//
// The target is under 2% more CPU per decision with the dashboard.

import { spawn, spawnSync } from "node:child_process";
import http from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { MemoryStore } from "ratekeeper";
import { DecisionService, Metrics, parseRules } from "../packages/server/dist/index.js";
import { DashboardStats, TeeObserver } from "../packages/server/dist/dashboard/stats.js";
import { machineLine, table } from "./lib/format.js";
import { median } from "./lib/stats.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const RUNS = opt("runs", 5);
const DURATION_S = opt("duration", 6);
const CONNECTIONS = opt("connections", 50);
const DECISIONS = opt("decisions", 300_000);
const KEYS = 100_000;

const RULES = `
domains:
  - domain: api
    descriptors:
      - key: user_id
        algorithm: sliding-window
        limit: 100
        window: 1m
      - key: hot
        algorithm: fixed-window
        limit: 1
        window: 1h
      - key: once
        algorithm: fixed-window
        limit: 1
        window: 1h
`;

// ---- 1. in process --------------------------------------------------------------------------

function service(withDashboard) {
  const metrics = new Metrics();
  const observer = withDashboard ? new TeeObserver(metrics, new DashboardStats()) : metrics;
  return new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "bench.yaml"), observer });
}

const workloads = {
  "admitted, 100k keys": (i) => ({ domain: "api", descriptors: [[{ key: "user_id", value: String(i % KEYS) }]] }),
  "one hot key, denied": () => ({ domain: "api", descriptors: [[{ key: "hot", value: "h" }]] }),
  // Each key twice in a row: the first is admitted, the second denied, and never seen again.
  "distinct keys, each denied once": (i) => ({ domain: "api", descriptors: [[{ key: "once", value: String(i >> 1) }]] }),
};

async function cpuNsPerDecision(svc, make, offset, n) {
  const inputs = Array.from({ length: n }, (_, i) => make(offset + i));
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await svc.decide(inputs[i]);
  const d = process.cpuUsage(t0);
  return ((d.user + d.system) * 1000) / n;
}

/** Child role: one sample, in a fresh process (its own JIT state): warm up, then measure. */
async function sampleRole(side, workload, n) {
  const svc = service(side === "on");
  const make = workloads[workload];
  await cpuNsPerDecision(svc, make, 0, 2 * n);
  globalThis.gc?.();
  console.log(JSON.stringify({ ns: await cpuNsPerDecision(svc, make, 2 * n, n) }));
}

function sample(side, workload) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--expose-gc", fileURLToPath(import.meta.url), "--role", "sample", side, workload, String(DECISIONS)],
      {
        cwd: root,
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let out = "";
    child.stdout.on("data", (c) => (out += c));
    child.once("exit", (code) => (code === 0 ? resolve(JSON.parse(out).ns) : reject(new Error(`sample exited ${code}`))));
  });
}

/**
 * The observer calls alone: the calls a workload's decisions make (recorded once), replayed into
 * the metrics only and into the metrics plus the dashboard, alternating in one process. Their
 * difference is the dashboard's whole cost per decision, measured without the store's and the
 * matcher's noise around it.
 */
async function observerCost(make) {
  const calls = [];
  const recorder = {
    decision: (d, r, o, k) => calls.push([d, r, o, k]),
    storeLatency: () => {},
    storeError: () => {},
  };
  const svc = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "bench.yaml"), observer: recorder });
  for (let i = 0; i < DECISIONS; i++) await svc.decide(make(i));
  // CPU time, not wall time: on a shared machine a replay can wait for a core.
  const replay = (obs) => {
    const t0 = process.cpuUsage();
    for (const [d, r, o, k] of calls) {
      obs.storeLatency(0.00002);
      obs.decision(d, r, o, k);
    }
    const u = process.cpuUsage(t0);
    return ((u.user + u.system) * 1000) / calls.length;
  };
  const metrics = new Metrics();
  const tee = new TeeObserver(new Metrics(), new DashboardStats());
  const a = [];
  const b = [];
  for (let r = 0; r < RUNS * 4; r++) {
    a.push(replay(metrics));
    b.push(replay(tee));
  }
  return median(b) - median(a);
}

async function inProcess() {
  const rows = [];
  for (const name of Object.keys(workloads)) {
    const off = [];
    const on = [];
    // Each sample in its own process, alternating sides (and which goes first), so drift on the
    // shared machine and JIT luck hit both alike.
    for (let r = 0; r < RUNS * 2; r++) {
      if (r % 2 === 0) {
        off.push(await sample("off", name));
        on.push(await sample("on", name));
      } else {
        on.push(await sample("on", name));
        off.push(await sample("off", name));
      }
    }
    const a = median(off);
    const b = median(on);
    const extra = await observerCost(workloads[name]);
    rows.push([
      name,
      a.toFixed(0),
      b.toFixed(0),
      `${(((b - a) / a) * 100).toFixed(1)}%`,
      extra.toFixed(0),
      `${((extra / a) * 100).toFixed(1)}%`,
    ]);
  }
  return table(
    ["decide() workload", "ns/decision, metrics only", "with dashboard", "difference", "dashboard's observer ns", "of a decision"],
    rows,
  );
}

// ---- 2. the service with wrk ----------------------------------------------------------------

function serve(rulesFile, extra) {
  const child = spawn(
    process.execPath,
    [
      "packages/server/dist/cli.js",
      "serve",
      "--config",
      rulesFile,
      "--port",
      "0",
      "--grpc-port",
      "0",
      "--host",
      "127.0.0.1",
      "--no-watch",
      ...extra,
    ],
    { cwd: root, env: { ...process.env, LOG_LEVEL: "info" }, stdio: ["ignore", "pipe", "inherit"] },
  );
  return new Promise((resolve, reject) => {
    let buf = "";
    child.stdout.on("data", (c) => {
      buf += c;
      const line = buf.split("\n").find((l) => l.includes('"httpPort"'));
      if (line) resolve({ child, port: JSON.parse(line).httpPort });
    });
    child.once("exit", (code) => reject(new Error(`service exited ${code}: ${buf}`)));
  });
}

/** A client that keeps /dashboard/api/events open and reads every event, as a browser tab does. */
function watch(port) {
  let events = 0;
  const req = http.get({ host: "127.0.0.1", port, path: "/dashboard/api/events" }, (res) => {
    res.on("data", (c) => (events += String(c).split("event: state").length - 1));
  });
  req.on("error", () => {});
  return { close: () => req.destroy(), events: () => events };
}

var clkTck;
function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
  clkTck ??= Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clkTck;
}

/** One wrk run, asynchronously: the watching client keeps reading its events meanwhile. */
function wrk(port, pid, script, durationS) {
  const cpu0 = cpuMs(pid);
  return new Promise((resolve, reject) => {
    const child = spawn("wrk", ["-t1", `-c${CONNECTIONS}`, `-d${durationS}s`, "-s", script, `http://127.0.0.1:${port}/v1/check`]);
    let out = "";
    child.stdout.on("data", (c) => (out += c));
    child.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`wrk exited ${code}`));
      const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
      const total = Number(/(\d+) requests in/.exec(out)?.[1]);
      resolve({ rps, cpuUs: ((cpuMs(pid) - cpu0) * 1000) / total });
    });
  });
}

async function overHttp(dir) {
  if (spawnSync("wrk", ["--version"]).error) return undefined;
  const rulesFile = join(dir, "rules.yaml");
  writeFileSync(rulesFile, RULES);
  // One in ten checks is on the hot key (denied): the dashboard's sketch has work to do.
  const script = join(dir, "check.lua");
  writeFileSync(
    script,
    `local reqs = {}
local i = 0
init = function(args)
  for k = 1, ${KEYS} do
    local d = (k % 10 == 0) and '{"hot":"h"}' or ('{"user_id":"' .. k .. '"}')
    reqs[k] = wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, '{"domain":"api","descriptors":[' .. d .. ']}')
  end
end
request = function()
  i = i % ${KEYS} + 1
  return reqs[i]
end
`,
  );
  const off = await serve(rulesFile, ["--no-dashboard"]);
  const on = await serve(rulesFile, []);
  const watched = await serve(rulesFile, []);
  const viewer = watch(watched.port);
  const cases = [
    { label: "--no-dashboard", s: off },
    { label: "dashboard on, nobody watching", s: on },
    { label: "dashboard on, a client on /dashboard/api/events", s: watched },
  ];
  const results = cases.map(() => []);
  try {
    for (const c of cases) await wrk(c.s.port, c.s.child.pid, script, 2);
    for (let r = 0; r < RUNS; r++) {
      const order = cases.map((_, i) => (i + r) % cases.length);
      for (const i of order) results[i].push(await wrk(cases[i].s.port, cases[i].s.child.pid, script, DURATION_S));
      process.stdout.write(`http run ${r + 1}/${RUNS} done\n`);
    }
  } finally {
    viewer.close();
    for (const c of cases) c.s.child.kill("SIGTERM");
  }
  const base = median(results[0].map((x) => x.cpuUs));
  const baseRps = median(results[0].map((x) => x.rps));
  const rows = cases.map((c, i) => {
    const cpu = median(results[i].map((x) => x.cpuUs));
    const rps = median(results[i].map((x) => x.rps));
    return [
      c.label,
      rps.toFixed(0),
      `${(((rps - baseRps) / baseRps) * 100).toFixed(1)}%`,
      cpu.toFixed(2),
      `${(((cpu - base) / base) * 100).toFixed(1)}%`,
    ];
  });
  return {
    t: table(["service, POST /v1/check (memory store)", "checks/s", "vs off", "server CPU us/check", "vs off"], rows),
    events: viewer.events(),
  };
}

if (argv[0] === "--role") await sampleRole(argv[2], argv[3], Number(argv[4]));
else await main();

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "rk-bench-dashboard-"));
  try {
    console.log(await machineLine());
    console.log(
      `in process: ${DECISIONS} decisions per sample after a warm-up of twice that, each sample in its own process, ${RUNS * 2} per side (alternating), medians of CPU time\n`,
    );
    const t1 = await inProcess();
    console.log(t1.text);
    const h = await overHttp(dir);
    if (h) {
      console.log(
        `\nservice: wrk -t1 -c${CONNECTIONS} -d${DURATION_S}s, ${RUNS} runs in rotating order, medians; 1 in 10 checks denied (one hot key); the watching client read ${h.events} events\n`,
      );
      console.log(h.t.text);
    } else console.log("\nservice rows skipped: wrk not found (apt-get install wrk)");
    if (argv.includes("--markdown")) console.log(`\n${t1.markdown}\n${h ? `\n${h.t.markdown}` : ""}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
