// Bench section "http": requests per second of a hello-world app with no limiter, with ratekeeper's
// middleware, and with the framework's usual rate limiter, measured in the same run:
//   - Express 5: bare | ratekeeper/express | express-rate-limit (its MemoryStore)
//   - Fastify 5: bare | ratekeeper/fastify (plugin) | @fastify/rate-limit (its in-memory store)
//   - node:http and Hono on @hono/node-server: bare | ratekeeper (no common peer)
// plus ratekeeper with `headers: false`, to separate the limiter's own cost from the cost of
// sending two more response headers (which every limiter that sends headers pays), and the
// denied rows: ratekeeper (and the peer) with a limit of 1 per hour, so every request after the
// first warm-up request is refused with 429, against the same bare app serving "hello".
// And the floors (bench/lib/http-floors.js): the bare app plus a middleware that sends
// ratekeeper's own bytes as constants, its two limit headers ("floor") or its whole 429
// ("floor-denied"), so ratekeeper's rows can also be read against what sending them costs.
//
// Every limiter is keyed by the client IP, keeps state in process memory, sends its default
// headers, and has a limit far above the load, so every request is allowed and the cost measured
// is the limiter's own. ratekeeper: one fixed-window limit (as express-rate-limit's store),
// IETF-draft headers (RateLimit-Policy + RateLimit), the MemoryStore.
//
// Method: each app runs in its own server process pinned to CPU 0; the load generator
// (autocannon, in this process) is pinned to CPU 1, so the two never share a core. Each round
// measures every variant of a framework once, in a rotating order, after a short warm-up: first
// saturated for `--duration` seconds (requests/s), then at a fixed rate that no variant finds
// hard, reading the server's own CPU time from /proc (CPU per request at equal load). The table
// quotes medians over `--runs` rounds of each measure and of its ratio to the bare app *in the
// same round*, so a noisy neighbour slows both sides of a ratio.
//
// Usage: node bench/http.js [--runs 5] [--duration 5] [--connections 50] [--rate 4000] [--rate-express 1500] [--only express,fastify] [--markdown]
// (`npm run bench -- http` runs it through bench/run.js.)

import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { fmtRate, fmtSpread, table, machineLine } from "./lib/format.js";
import { summarize } from "./lib/stats.js";
import { captureAnswers, floorParts } from "./lib/http-floors.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
};

const CLK_TCK = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout) || 100;

/** The apps: framework -> variant -> async () => { port, close }. */
const HUGE = 1_000_000_000;
const POLICY = { algorithm: "fixed-window", limit: HUGE, window: "1m" };
/** ratekeeper's options per variant: its defaults, or with the limit headers turned off (to show what they cost). */
const RK = {
  ratekeeper: { limiter: POLICY },
  "ratekeeper-noheaders": { limiter: POLICY, headers: false },
  // Every request refused: a limit of 1 per hour, spent by the first warm-up request.
  "ratekeeper-denied": { limiter: { ...POLICY, limit: 1, window: "1h" } },
};
/** Variants whose requests are all refused (429) once the first request has spent the limit. */
const DENIED = new Set(["ratekeeper-denied", "peer-denied", "floor-denied"]);
/** The floor variants: the bare app plus ratekeeper's bytes sent as constants. */
const FLOORS = new Set(["floor", "floor-denied"]);
/**
 * The floors' part for `framework`, from ratekeeper's answers, which the bench process captured
 * before starting any server and handed over in BENCH_FLOOR_ANSWERS: a server that captured them
 * itself kept fetch's client and a second server in its process and served about 25% slower.
 */
function floorPart(framework, variant, hello) {
  return floorParts[framework](variant, JSON.parse(process.env.BENCH_FLOOR_ANSWERS), hello);
}

async function serveExpress(variant) {
  const express = (await import("express")).default;
  const app = express();
  app.disable("x-powered-by");
  if (RK[variant]) {
    const { rateLimit } = await import("ratekeeper/express");
    app.use(rateLimit(RK[variant]));
  } else if (variant === "peer" || variant === "peer-denied") {
    const { rateLimit } = await import("express-rate-limit");
    app.use(rateLimit({ windowMs: 3_600_000, limit: variant === "peer" ? HUGE : 1 }));
  } else if (FLOORS.has(variant)) app.use(floorPart("express", variant));
  app.get("/", (_req, res) => res.send("hello"));
  const server = app.listen(0, "127.0.0.1");
  await once(server, "listening");
  return server.address().port;
}

async function serveFastify(variant) {
  const Fastify = (await import("fastify")).default;
  const app = Fastify();
  if (RK[variant]) {
    const { rateLimitPlugin } = await import("ratekeeper/fastify");
    await app.register(rateLimitPlugin, RK[variant]);
  } else if (variant === "peer" || variant === "peer-denied") {
    await app.register((await import("@fastify/rate-limit")).default, { max: variant === "peer" ? HUGE : 1, timeWindow: 3_600_000 });
  } else if (FLOORS.has(variant) || variant === "plugin") {
    // Registered as the limiters are (awaited, skip-override): an awaited register() of a plugin that
    // does nothing costs bare Fastify about a fifth of its req/s here (docs/benchmarks/http.md).
    const hook = variant === "plugin" ? undefined : floorPart("fastify", variant);
    const plugin = (instance, _opts, done) => {
      if (hook !== undefined) instance.addHook("onRequest", hook);
      done();
    };
    plugin[Symbol.for("skip-override")] = true;
    await app.register(plugin);
  }
  app.get("/", async () => "hello");
  await app.listen({ port: 0, host: "127.0.0.1" });
  return app.server.address().port;
}

async function serveNode(variant) {
  const http = await import("node:http");
  const hello = (_req, res) => res.end("hello");
  let listener = hello;
  if (RK[variant]) {
    const { withRateLimit } = await import("ratekeeper/node");
    listener = withRateLimit(RK[variant], hello);
  } else if (FLOORS.has(variant)) listener = floorPart("node", variant, hello);
  const server = http.createServer(listener).listen(0, "127.0.0.1");
  await once(server, "listening");
  return server.address().port;
}

async function serveHono(variant) {
  const { Hono } = await import("hono");
  const { serve } = await import("@hono/node-server");
  const app = new Hono();
  if (RK[variant]) {
    const { rateLimit } = await import("ratekeeper/hono");
    app.use(rateLimit(RK[variant]));
  } else if (FLOORS.has(variant)) app.use(floorPart("hono", variant));
  app.get("/", (c) => c.text("hello"));
  return await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => resolve(info.port));
    void s;
  });
}

const FRAMEWORKS = {
  express: {
    serve: serveExpress,
    variants: ["bare", "ratekeeper", "peer", "ratekeeper-noheaders", "ratekeeper-denied", "peer-denied", "floor", "floor-denied"],
    peer: "express-rate-limit 8",
  },
  fastify: {
    serve: serveFastify,
    variants: ["bare", "ratekeeper", "peer", "ratekeeper-noheaders", "ratekeeper-denied", "peer-denied", "floor", "floor-denied", "plugin"],
    peer: "@fastify/rate-limit 11",
  },
  node: { serve: serveNode, variants: ["bare", "ratekeeper", "ratekeeper-noheaders", "ratekeeper-denied", "floor", "floor-denied"] },
  hono: { serve: serveHono, variants: ["bare", "ratekeeper", "ratekeeper-noheaders", "ratekeeper-denied", "floor", "floor-denied"] },
};

// Server mode: `node bench/http.js --serve <framework> <variant>` prints its port and serves until killed.
const serveAt = args.indexOf("--serve");
if (serveAt >= 0) {
  const fw = FRAMEWORKS[args[serveAt + 1]];
  const port = await fw.serve(args[serveAt + 2]);
  console.log(JSON.stringify({ port }));
} else {
  await main();
}

/** Pins a process to one CPU when taskset exists (Linux); reports whether it could. */
function pin(pid, cpu) {
  const r = spawnSync("taskset", ["-cp", String(cpu), String(pid)], { stdio: "ignore" });
  return r.status === 0;
}

async function startServer(framework, variant, floorAnswers) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--serve", framework, variant], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, BENCH_FLOOR_ANSWERS: JSON.stringify(floorAnswers) },
  });
  pin(child.pid, 0);
  const rl = createInterface({ input: child.stdout });
  const [line] = await once(rl, "line");
  rl.close();
  const { port } = JSON.parse(line);
  return { port, pid: child.pid, stop: () => child.kill("SIGKILL") };
}

/** CPU time (user + system, ms) the process has used so far, from /proc (Linux); NaN elsewhere. */
function cpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields 14 and 15 of proc(5) (utime, stime), in clock ticks: 11 and 12 after the command name.
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
  } catch {
    return NaN;
  }
}

async function load(autocannon, server, durationS, connections, overallRate) {
  const c0 = cpuMs(server.pid);
  const r = await autocannon({
    url: `http://127.0.0.1:${server.port}/`,
    connections,
    duration: durationS,
    pipelining: 1,
    ...(overallRate ? { overallRate } : {}),
  });
  const cpu = cpuMs(server.pid) - c0;
  return {
    rps: r.requests.average,
    cpuUsPerReq: (cpu * 1000) / r.requests.total,
    non2xx: r.non2xx,
    ok2xx: r["2xx"],
    errors: r.errors + r.timeouts,
  };
}

async function main() {
  const RUNS = Number(opt("--runs", process.env.BENCH_RUNS ?? 5));
  const DURATION = Number(opt("--duration", process.env.BENCH_DURATION ?? 5));
  const CONNECTIONS = Number(opt("--connections", 50));
  const ONLY = opt("--only", "express,fastify,node,hono").split(",");
  const MARKDOWN = args.includes("--markdown");
  // Fixed rates (req/s) for the CPU measurement: well below what each framework serves on one core
  // even when the machine is busy, so no variant is ever saturated (saturation batches work and
  // lowers CPU per request, which would reward whichever variant was starved the most).
  const RATE = {
    express: Number(opt("--rate-express", 1500)),
    fastify: Number(opt("--rate", 4000)),
    node: Number(opt("--rate", 4000)),
    hono: Number(opt("--rate", 4000)),
  };
  const autocannon = (await import("autocannon")).default;
  const machine = await machineLine();
  const pinned = pin(process.pid, 1);

  console.log(`http: ${machine}`);
  console.log(
    `autocannon -c ${CONNECTIONS} -d ${DURATION} saturated, then -c 10 -d ${DURATION} at a fixed rate (in this process${pinned ? ", CPU 1" : ""}) against one server process per variant${pinned ? " (CPU 0)" : ""}; ${RUNS} rounds, medians; warm-up 1 s per variant per round`,
  );

  const floorAnswers = await captureAnswers(RK);
  const rows = [];
  // ratekeeper against its floors, per framework: [label, req/s ratios, CPU ratios] per round.
  const floorLines = [];
  for (const fw of ONLY) {
    const spec = FRAMEWORKS[fw];
    if (!spec) throw new Error(`--only: unknown framework ${fw}`);
    const servers = {};
    for (const v of spec.variants) servers[v] = await startServer(fw, v, floorAnswers);
    const rps = Object.fromEntries(spec.variants.map((v) => [v, []]));
    const ratio = Object.fromEntries(spec.variants.map((v) => [v, []]));
    const cpu = Object.fromEntries(spec.variants.map((v) => [v, []]));
    const cpuRatio = Object.fromEntries(spec.variants.map((v) => [v, []]));
    const floorRatios = {};
    let problems = 0;
    try {
      for (let round = 0; round < RUNS; round++) {
        // Rotate (and every other round reverse) the order so no variant always runs first or last.
        const order = spec.variants.map((_, i) => spec.variants[(i + round) % spec.variants.length]);
        if (round % 2 === 1) order.reverse();
        const got = {};
        const gotCpu = {};
        for (const v of order) {
          await load(autocannon, servers[v], 1, CONNECTIONS);
          const r = await load(autocannon, servers[v], DURATION, CONNECTIONS);
          // The same variant again at a fixed rate every variant sustains: CPU per request at equal load.
          const f = await load(autocannon, servers[v], DURATION, 10, RATE[fw]);
          // A denied variant must refuse everything (its first warm-up request spent the limit).
          problems += DENIED.has(v) ? r.ok2xx + f.ok2xx + r.errors + f.errors : r.non2xx + r.errors + f.non2xx + f.errors;
          got[v] = r.rps;
          gotCpu[v] = f.cpuUsPerReq;
        }
        for (const [rk, floor] of [
          ["ratekeeper", "floor"],
          ["ratekeeper-denied", "floor-denied"],
        ]) {
          const vs = (floorRatios[rk] ??= { rps: [], cpu: [] });
          vs.rps.push(got[rk] / got[floor]);
          vs.cpu.push(gotCpu[floor] / gotCpu[rk]);
        }
        for (const v of spec.variants) {
          rps[v].push(got[v]);
          ratio[v].push(got[v] / got.bare);
          cpu[v].push(gotCpu[v]);
          cpuRatio[v].push(gotCpu.bare / gotCpu[v]);
        }
        process.stdout.write(
          `  ${fw} round ${round + 1}/${RUNS}: ${spec.variants.map((v) => `${v} ${fmtRate(got[v])}/s ${gotCpu[v].toFixed(1)} µs CPU/req`).join(", ")}\n`,
        );
      }
    } finally {
      for (const s of Object.values(servers)) s.stop();
    }
    if (problems > 0)
      console.log(
        `  WARNING: ${fw}: ${problems} responses with the wrong status, or errors (a limiter denied, admitted or failed unexpectedly: the comparison is void)`,
      );
    for (const v of spec.variants) {
      const r = summarize(rps[v]);
      const q = summarize(ratio[v]);
      const c = summarize(cpu[v]);
      const cq = summarize(cpuRatio[v]);
      const label = {
        bare: `${fw} (no limiter)`,
        ratekeeper: `${fw} + ratekeeper`,
        "ratekeeper-noheaders": `${fw} + ratekeeper, headers: false`,
        peer: `${fw} + ${spec.peer}`,
        "ratekeeper-denied": `${fw} + ratekeeper, every request refused (429)`,
        "peer-denied": `${fw} + ${spec.peer}, every request refused (429)`,
        floor: `${fw} + ratekeeper's two limit headers as constants (floor)`,
        "floor-denied": `${fw} answering ratekeeper's 429 as constants (floor)`,
        plugin: `${fw} + an empty plugin (awaited register, no hook)`,
      }[v];
      const pct = (x) => `${(x * 100).toFixed(1)}%`;
      if (v === "ratekeeper" || v === "ratekeeper-denied") {
        const fr = floorRatios[v];
        floorLines.push(
          `${fw} ${v === "ratekeeper" ? "allowed" : "refused"}: ${pct(summarize(fr.rps).median)} of the floor's req/s, ${pct(summarize(fr.cpu).median)} CPU-equivalent`,
        );
      }
      rows.push([
        label,
        fmtRate(r.median),
        fmtSpread(r.spread),
        v === "bare" ? "100%" : pct(q.median),
        c.median.toFixed(1),
        fmtSpread(c.spread),
        v === "bare" ? "100%" : pct(cq.median),
      ]);
    }
  }
  const t = table(["app", "req/s", "spread", "req/s of bare", "CPU µs/req", "spread", "CPU-equivalent of bare"], rows);
  console.log(
    "\nreq/s: saturated (autocannon -c " +
      CONNECTIONS +
      "); of bare: the median over rounds of (variant req/s / bare req/s in the same round).\n" +
      "CPU µs/req: the server process's own CPU time (/proc) per request at a fixed rate (express " +
      RATE.express +
      ", others " +
      RATE.fastify +
      " req/s, -c 10),\n" +
      "the same for every variant. CPU-equivalent of bare: the median of (bare CPU/req / variant CPU/req) in the same round:\n" +
      "the share of bare throughput the variant keeps when the server's core is the bottleneck. Time stolen by other\n" +
      "processes on a shared machine does not count against anyone, so it is the steadier of the two measures.",
  );
  console.log(`\n${t.text}`);
  if (MARKDOWN) console.log(`\n${t.markdown}`);
  console.log(
    "\nratekeeper against its floors (the same app sending ratekeeper's limit headers, or its 429, as constants;\n" +
      "medians over rounds of the ratio in the same round):\n" +
      floorLines.map((l) => `  ${l}`).join("\n"),
  );
}
