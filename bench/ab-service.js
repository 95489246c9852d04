// Before/after of the decision service: two builds of `ratekeeper serve` up at once, measured in
// turns, so that a shared machine's load falls on both alike. Not a section of `npm run bench`:
// a tool for judging one change (docs/benchmarks/service.md quotes its runs).
//
// Usage: node bench/ab-service.js <checkout A> <checkout B> [rounds=6] [auth|check] [--shared]
//   A checkout is a built tree (`npm run build`), e.g. a `git worktree` of main and the work tree.
// Each round starts both servers afresh, warms each for 2 s, then runs `wrk -t1 -c50` for 3 s
// against each (the order alternates from round to round), with 100,000 distinct user ids
// through examples/rules.yaml's `api` domain, reads the server's own CPU time from /proc (CPU us
// per request is the measure; requests/s follow whatever else runs) and stops both.
// Prints both medians and B/A per round, for all CPU time and for user time alone.
// Why fresh processes per round: a server process seems to keep its own cost level for its life
// (heap layout, JIT decisions). With the two processes shared by every round (`--shared`, how
// this script worked before), an A/A run (/work/main against itself, 24 rounds of 2 s, load 3-4,
// 2026-11-27) gave B/A median 0.900, 18 of 24 lower: the rounds were not independent samples.
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { summarize } from "./lib/stats.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const SHARED = process.argv.includes("--shared");
const [dirA, dirB, roundsArg, kind = "auth"] = process.argv.slice(2).filter((a) => a !== "--shared");
if (!dirA || !dirB) throw new Error("usage: node bench/ab-service.js <checkout A> <checkout B> [rounds] [auth|check]");
const rounds = Number(roundsArg ?? 6);
const request =
  kind === "auth"
    ? `wrk.format("GET", "/v1/auth?domain=api&d=user_id%3D" .. k)`
    : `wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, '{"domain":"api","descriptors":[{"user_id":"' .. k .. '"}]}')`;
const script = join(tmpdir(), `ab-service-${process.pid}.lua`);
writeFileSync(
  script,
  `local reqs = {}\nlocal i = 0\ninit = function(args)\n  for k = 1, 100000 do reqs[k] = ${request} end\nend\n` +
    `request = function()\n  i = i % 100000 + 1\n  return reqs[i]\nend\n`,
);
const clkTck = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** User + system CPU seconds of a process, and user alone, from /proc/<pid>/stat (fields 14 and 15). */
function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return { all: (Number(f[11]) + Number(f[12])) / clkTck, user: Number(f[11]) / clkTck };
}

async function start(dir, port) {
  const args = [`${dir}/packages/server/dist/cli.js`, "serve", "--config", `${dir}/examples/rules.yaml`];
  args.push("--port", String(port), "--grpc-port", "0", "--host", "127.0.0.1", "--no-watch");
  const child = spawn(process.execPath, args, { env: { ...process.env, LOG_LEVEL: "warn" }, stdio: "ignore" });
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const up = spawnSync("curl", ["-s", "-o", "/dev/null", `http://127.0.0.1:${port}/healthz`]);
    if (up.status === 0) return child;
  }
  child.kill();
  throw new Error(`${dir}: the service did not start`);
}

function run(port, pid, seconds = 3) {
  const c0 = cpuSeconds(pid);
  const r = spawnSync("wrk", ["-t1", "-c50", `-d${seconds}`, "-s", script, `http://127.0.0.1:${port}/`], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr}`);
  const n = Number(/(\d+) requests in/.exec(r.stdout)[1]);
  const c1 = cpuSeconds(pid);
  return { rps: n / seconds, us: ((c1.all - c0.all) * 1e6) / n, userUs: ((c1.user - c0.user) * 1e6) / n };
}

const ports = { A: 18201, B: 18202 };
const dirs = { A: dirA, B: dirB };
let servers = {};

/** Starts both servers and warms each up (JIT, the first 100,000 keys in the store). */
async function startBoth() {
  servers = { A: await start(dirs.A, ports.A), B: await start(dirs.B, ports.B) };
  for (const k of ["A", "B"]) run(ports[k], servers[k].pid, 2);
}

function stopBoth() {
  for (const k of ["A", "B"]) servers[k]?.kill();
  servers = {};
}

/** Waits until a stopped server's port is free again, so the next round's server can bind it. */
async function exited(child) {
  if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once("exit", r));
}

try {
  if (SHARED) await startBoth();
  const res = { A: [], B: [] };
  for (let i = 0; i < rounds; i++) {
    if (!SHARED) await startBoth();
    for (const k of i % 2 ? ["B", "A"] : ["A", "B"]) res[k].push(run(ports[k], servers[k].pid));
    if (!SHARED) {
      const stopped = Object.values(servers);
      stopBoth();
      await Promise.all(stopped.map(exited));
    }
  }
  for (const k of ["A", "B"]) {
    const us = res[k].map((r) => r.us);
    const rps = summarize(res[k].map((r) => r.rps)).median;
    console.log(
      `${k} ${kind}: CPU us/request median ${summarize(us).median.toFixed(2)} (${us.map((u) => u.toFixed(1)).join(" ")}), req/s median ${rps.toFixed(0)}`,
    );
  }
  const ratios = res.A.map((a, i) => res.B[i].us / a.us);
  const lower = (xs) => `${xs.filter((x) => x < 1).length} of ${xs.length} lower`;
  console.log(
    `B/A CPU per request, per round: ${ratios.map((x) => x.toFixed(3)).join(" ")}; median ${summarize(ratios).median.toFixed(3)}, ${lower(ratios)}`,
  );
  // User time alone: the kernel's share (the sockets) varies most from round to round on a VM,
  // and a change to ratekeeper's JavaScript shows in user time.
  const user = res.A.map((a, i) => res.B[i].userUs / a.userUs);
  const userMedians = ["A", "B"].map((k) => summarize(res[k].map((r) => r.userUs)).median.toFixed(2));
  console.log(
    `user CPU us/request medians A ${userMedians[0]} B ${userMedians[1]}; B/A per round: ${user.map((x) => x.toFixed(3)).join(" ")}; median ${summarize(user).median.toFixed(3)}, ${lower(user)}`,
  );
} finally {
  stopBoth();
}
