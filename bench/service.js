// Benchmark section "service": the decision service's checks per second, as a process, next to
// the ceilings measured in the same run:
//   - HTTP keep-alive with wrk: a bare node:http hello-world server (the ceiling for a Node
//     service on this machine), POST /v1/check (single and batches of 10) and GET /v1/auth
//     (nginx auth_request) on `ratekeeper serve` with the memory store, and (when redis-server
//     is installed) with the Redis store on a throw-away redis-server; and the bare server
//     answering with the service's own bytes for one check and for auth (made once: what
//     node:http costs for that answer contract, the floor of the service's rows);
//   - gRPC (Envoy RLS ShouldRateLimit) from a Node client with N concurrent calls in a separate
//     process, against the service and against a bare grpc-js server answering the same RPC
//     with a constant response (the gRPC ceiling).
// Keys cycle over 100k user ids (examples/rules.yaml, domain "api": sliding-window 100/min), so
// nearly every check is admitted and the store holds a realistic number of keys.
//
//   npm run bench -- service                       (3 runs of 8 s per target)
//   npm run bench -- service -- --runs 5 --duration 10 --connections 50 --markdown
//
// Each server runs in its own process; wrk (one thread) and the gRPC client take the other core.

// Longer than the ~350 lines of a source file, and its main() longer than 60, on purpose: a
// section is one script a reader follows top to bottom (its variants, how each is started and
// loaded, the table it prints), like a lab protocol; the parts sections share (timing, statistics,
// formatting, redis-server) are in bench/lib/.

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import net from "node:net";
import { fmtRate, machineLine, table } from "./lib/format.js";
import { median } from "./lib/stats.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const RUNS = opt("runs", 3);
const DURATION_S = opt("duration", 8);
const CONNECTIONS = opt("connections", 50);
const GRPC_CONCURRENCY = opt("grpc-concurrency", 50);
const CHANNELS = opt("grpc-channels", 4);
const GRPC_CLIENTS = opt("grpc-clients", 1);
const KEYS = 100_000;
/** Checks per request in the batch row. */
const BATCH = 10;

// ---- child roles ------------------------------------------------------------------------------

if (argv[0] === "--role") {
  const role = argv[1];
  if (role === "bare-http") {
    const http = await import("node:http");
    // Reads the body like the service must (a POST's body costs node:http more than the request line).
    // Under /shape, it answers with the service's own bytes, made once: POST the 200 of a
    // /v1/check (limit headers, content-type and -length, the JSON body), GET the 204 of a
    // /v1/auth. What node:http costs for those answers, and nothing else: the floor of the
    // service's rows with this answer contract.
    const limit = ["ratelimit-policy", '"100-per-1m";q=100;w=60', "ratelimit", '"100-per-1m";r=99;t=58'];
    const checkBody =
      '{"allowed":true,"domain":"api","statuses":[{"key":"user_id=5","allowed":true,"overLimit":false,"shadow":false,' +
      '"unlimited":false,"limit":100,"remaining":99,"retryAfterMs":0,"resetAfterMs":57872,"delayMs":0,"windowMs":60000,' +
      '"policy":"100-per-1m","reason":null,"explain":{"rule":"api/user_id","source":"rule",' +
      '"why":"matched user_id: sliding-window 100 per 60000 ms; allowed cost 1, 99 left"}}]}';
    const checkHeaders = [...limit, "content-type", "application/json", "content-length", String(Buffer.byteLength(checkBody))];
    const server = http.createServer((req, res) => {
      const shape = req.url === "/shape";
      if (req.method === "GET") return shape ? res.writeHead(204, limit).end() : res.end("hello");
      req.on("data", () => {});
      req.on("end", () => (shape ? res.writeHead(200, checkHeaders).end(checkBody) : res.end("hello")));
    });
    server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: server.address().port })));
  } else if (role === "bare-grpc") {
    const grpc = await import("@grpc/grpc-js");
    const { loadRlsDefinition } = await import("../packages/server/dist/transport/grpc.js");
    const def = loadRlsDefinition();
    const server = new grpc.Server();
    // One status per descriptor, as the service answers; built once per descriptor count.
    const status = {
      code: "OK",
      current_limit: { name: "100-per-1m", requests_per_unit: 100, unit: "MINUTE" },
      limit_remaining: 99,
      duration_until_reset: { seconds: 60, nanos: 0 },
    };
    const answers = new Map();
    const answerFor = (n) => {
      let a = answers.get(n);
      if (!a) answers.set(n, (a = { overall_code: "OK", statuses: Array.from({ length: n }, () => status), response_headers_to_add: [] }));
      return a;
    };
    server.addService(def.envoy.service.ratelimit.v3.RateLimitService.service, {
      ShouldRateLimit: (call, cb) => cb(null, answerFor(call.request.descriptors.length)),
    });
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => console.log(JSON.stringify({ port })));
  } else if (role === "grpc-client") {
    await grpcClient(Number(argv[2]), Number(argv[3]), Number(argv[4]), Number(argv[5]));
  }
} else {
  await main();
}

// `descriptors` per call: 1, or several (distinct user ids, each decided and charged, as Envoy
// sends one descriptor per rate_limits action).
async function grpcClient(port, concurrency, durationS, descriptors) {
  const grpc = await import("@grpc/grpc-js");
  const { loadRlsDefinition } = await import("../packages/server/dist/transport/grpc.js");
  const def = loadRlsDefinition();
  // Several channels (a distinct option keeps grpc-js from sharing one connection between them):
  // one HTTP/2 connection serialises the client's framing work.
  const clients = Array.from(
    { length: CHANNELS },
    (_, i) =>
      new def.envoy.service.ratelimit.v3.RateLimitService(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { "bench.channel": i }),
  );
  await Promise.all(clients.map((c) => new Promise((r, j) => c.waitForReady(Date.now() + 5000, (e) => (e ? j(e) : r())))));
  let rr = 0;
  const call = (req) =>
    new Promise((resolve, reject) => clients[rr++ % CHANNELS].ShouldRateLimit(req, (e, res) => (e ? reject(e) : resolve(res))));
  let n = 0;
  let errors = 0;
  const lat = [];
  const run = async (warm) => {
    const end = Date.now() + (warm ? 1000 : durationS * 1000);
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (Date.now() < end) {
          const base = n++ * descriptors;
          const req = {
            domain: "api",
            descriptors: Array.from({ length: descriptors }, (_, i) => ({
              entries: [{ key: "user_id", value: String((base + i) % KEYS) }],
            })),
          };
          const t0 = process.hrtime.bigint();
          try {
            await call(req);
            if (!warm) lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
          } catch {
            errors++;
          }
        }
      }),
    );
  };
  await run(true);
  const t0 = Date.now();
  await run(false);
  const s = (Date.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  // calls: every call made, warm-up included (the server's CPU is read over all of them).
  console.log(JSON.stringify({ rps: lat.length / s, p50: q(0.5), p99: q(0.99), errors, calls: n }));
  for (const c of clients) c.close();
}

// ---- orchestration ----------------------------------------------------------------------------

function startChild(args, env = {}) {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let buf = "";
    child.stdout.on("data", (c) => {
      buf += c;
      const line = buf.split("\n").find((l) => l.includes('"port"') || l.includes('"httpPort"'));
      if (line) {
        const j = JSON.parse(line);
        resolve({ child, port: j.port ?? j.httpPort, grpcPort: j.grpcPort });
      }
    });
    child.once("exit", (code) => reject(new Error(`child ${args.join(" ")} exited ${code}: ${buf}`)));
  });
}

// The requests are built once in init() and cycled through: building each one in request()
// (wrk.format per request) costs wrk's single thread more than the server's work.
function wrkScript(dir, kind) {
  const file = join(dir, `${kind}.lua`);
  const build =
    kind === "batch"
      ? `wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, '{"checks":[' .. table.concat((function() local t = {} for j = 0, ${BATCH - 1} do t[#t + 1] = '{"domain":"api","descriptors":[{"user_id":"' .. ((k * ${BATCH} + j) % ${KEYS}) .. '"}]}' end return t end)(), ",") .. ']}')`
      : kind === "check"
        ? `wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, '{"domain":"api","descriptors":[{"user_id":"' .. k .. '"}]}')`
        : kind === "bare" || kind === "shape"
          ? `wrk.format("POST", "${kind === "shape" ? "/shape" : "/"}", { ["Content-Type"] = "application/json" }, '{"domain":"api","descriptors":[{"user_id":"' .. k .. '"}]}')`
          : `wrk.format("GET", "/v1/auth?domain=api&d=user_id%3D" .. k)`;
  writeFileSync(
    file,
    `local reqs = {}
local i = 0
init = function(args)
  for k = 1, ${KEYS} do reqs[k] = ${build} end
end
request = function()
  i = i % ${KEYS} + 1
  return reqs[i]
end
`,
  );
  return file;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function portOpen(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, "127.0.0.1");
    c.once("connect", () => {
      c.destroy();
      resolve(true);
    });
    c.once("error", () => resolve(false));
  });
}

function toMs(text) {
  const m = /^([\d.]+)(us|ms|s)$/.exec(text);
  if (!m) return NaN;
  return Number(m[1]) * (m[2] === "us" ? 0.001 : m[2] === "s" ? 1000 : 1);
}

// (a function-scoped cache: main() runs before module-level declarations below it are initialised)
var clkTck;
/** CPU time (user + system) a process has used, in ms, from /proc (Linux); NaN elsewhere. */
function cpuMs(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
    clkTck ??= Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clkTck;
  } catch {
    return NaN;
  }
}

/**
 * One wrk run. With `pid`, also the server's CPU time per request (us): unlike requests/s it
 * barely depends on what else the shared machine is doing, so it compares implementations fairly.
 */
function wrk(port, path, script, durationS = DURATION_S, pid = undefined) {
  const cpu0 = pid ? cpuMs(pid) : NaN;
  const args = [
    "-t1",
    `-c${CONNECTIONS}`,
    `-d${durationS}s`,
    "--latency",
    ...(script ? ["-s", script] : []),
    `http://127.0.0.1:${port}${path}`,
  ];
  const r = spawnSync("wrk", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr}`);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(r.stdout)?.[1]);
  const p50 = toMs(/\s50%\s+(\S+)/.exec(r.stdout)?.[1] ?? "");
  const p99 = toMs(/\s99%\s+(\S+)/.exec(r.stdout)?.[1] ?? "");
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(r.stdout)?.[1] ?? 0);
  const total = Number(/(\d+) requests in/.exec(r.stdout)?.[1]);
  const cpuUs = pid ? ((cpuMs(pid) - cpu0) * 1000) / total : NaN;
  return { rps, p50, p99, non2xx, cpuUs };
}

// grpc-js's client costs more CPU per call than its server: one client process saturates before
// the server does (a profile of the service showed it two-thirds idle). So GRPC_CLIENTS client
// processes run at once, each with GRPC_CONCURRENCY calls in flight; their rates add up.
async function grpcRun(port, descriptors = 1, pid = undefined) {
  const cpu0 = pid ? cpuMs(pid) : NaN;
  const one = () =>
    new Promise((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [
          fileURLToPath(import.meta.url),
          "--role",
          "grpc-client",
          String(port),
          String(GRPC_CONCURRENCY),
          String(DURATION_S),
          String(descriptors),
          "--grpc-channels",
          String(CHANNELS),
        ],
        { cwd: root, stdio: ["ignore", "pipe", "inherit"] },
      );
      let out = "";
      child.stdout.on("data", (c) => (out += c));
      child.once("exit", (code) =>
        code === 0 ? resolve(JSON.parse(out.trim().split("\n").pop())) : reject(new Error(`grpc client exited ${code}`)),
      );
    });
  const rs = await Promise.all(Array.from({ length: GRPC_CLIENTS }, one));
  // The server's CPU per call (user + system, from /proc), as for the HTTP rows: the gRPC client
  // costs more CPU per call than the server, so calls/s is bounded by the client as much as by
  // the server; CPU per call is the server's own cost.
  const calls = rs.reduce((a, r) => a + r.calls, 0);
  const cpuUs = pid ? ((cpuMs(pid) - cpu0) * 1000) / calls : NaN;
  return { rps: rs.reduce((a, r) => a + r.rps, 0), p50: median(rs.map((r) => r.p50)), p99: Math.max(...rs.map((r) => r.p99)), cpuUs };
}

async function main() {
  if (spawnSync("wrk", ["--version"]).error) {
    console.error("service bench: wrk not found (apt-get install wrk)");
    process.exit(1);
  }
  const dir = mkdtempSync(join(tmpdir(), "rk-bench-service-"));
  const self = fileURLToPath(import.meta.url);
  const bare = await startChild([self, "--role", "bare-http"]);
  const bareGrpc = await startChild([self, "--role", "bare-grpc"]);
  const serve = (extra = []) =>
    startChild(
      [
        "packages/server/dist/cli.js",
        "serve",
        "--config",
        "examples/rules.yaml",
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
        LOG_LEVEL: "info",
      },
    );
  const svc = await serve();
  // With redis-server on the machine: a throw-away one on a free port, and the service on it.
  let redis;
  let svcRedis;
  if (!spawnSync("redis-server", ["--version"]).error) {
    const port = await freePort();
    const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    });
    redis = { child };
    for (let i = 0; i < 100 && !(await portOpen(port)); i++) await new Promise((r) => setTimeout(r, 50));
    svcRedis = await serve(["--redis", `redis://127.0.0.1:${port}`, "--redis-timeout", "1000"]);
  }
  const checkLua = wrkScript(dir, "check");
  const authLua = wrkScript(dir, "auth");
  const bareLua = wrkScript(dir, "bare");
  const shapeLua = wrkScript(dir, "shape");
  const batchLua = wrkScript(dir, "batch");
  const http = [
    { id: "bare", label: "bare node:http hello world (ceiling)", run: () => wrk(bare.port, "/", undefined, DURATION_S, bare.child.pid) },
    {
      id: "bare-post",
      label: "bare node:http reading the same POST bodies",
      run: () => wrk(bare.port, "/", bareLua, DURATION_S, bare.child.pid),
    },
    {
      id: "shape-check",
      label: "bare node:http answering POST /v1/check's bytes (made once)",
      run: () => wrk(bare.port, "/shape", shapeLua, DURATION_S, bare.child.pid),
    },
    {
      id: "shape-auth",
      label: "bare node:http answering GET /v1/auth's bytes (made once)",
      run: () => wrk(bare.port, "/shape", undefined, DURATION_S, bare.child.pid),
    },
    {
      id: "check",
      label: "ratekeeper POST /v1/check (memory store)",
      run: () => wrk(svc.port, "/v1/check", checkLua, DURATION_S, svc.child.pid),
    },
    {
      id: "auth",
      label: "ratekeeper GET /v1/auth (memory store)",
      run: () => wrk(svc.port, "/v1/auth", authLua, DURATION_S, svc.child.pid),
    },
    {
      id: "batch",
      label: `ratekeeper POST /v1/check, batches of ${BATCH}`,
      perReq: BATCH,
      run: () => wrk(svc.port, "/v1/check", batchLua, DURATION_S, svc.child.pid),
    },
    ...(svcRedis
      ? [
          {
            id: "check-redis",
            label: "ratekeeper POST /v1/check (Redis store)",
            run: () => wrk(svcRedis.port, "/v1/check", checkLua, DURATION_S, svcRedis.child.pid),
          },
          {
            id: "auth-redis",
            label: "ratekeeper GET /v1/auth (Redis store)",
            run: () => wrk(svcRedis.port, "/v1/auth", authLua, DURATION_S, svcRedis.child.pid),
          },
        ]
      : []),
  ];
  const grpcCases = [
    {
      id: "grpc-bare",
      label: "bare grpc-js RLS, constant answer, 1 descriptor (ceiling)",
      run: () => grpcRun(bareGrpc.port, 1, bareGrpc.child.pid),
    },
    {
      id: "grpc",
      label: "ratekeeper ShouldRateLimit, 1 descriptor (memory store)",
      base: "grpc-bare",
      run: () => grpcRun(svc.grpcPort, 1, svc.child.pid),
    },
    {
      id: "grpc-bare-5",
      label: "bare grpc-js RLS, constant answer, 5 descriptors (ceiling)",
      run: () => grpcRun(bareGrpc.port, 5, bareGrpc.child.pid),
    },
    {
      id: "grpc-5",
      label: "ratekeeper ShouldRateLimit, 5 descriptors (memory store)",
      base: "grpc-bare-5",
      run: () => grpcRun(svc.grpcPort, 5, svc.child.pid),
    },
  ];
  const results = {};
  try {
    // Warm-up: JIT and the store's keys.
    wrk(svc.port, "/v1/check", checkLua, 2);
    wrk(svc.port, "/v1/auth", authLua, 2);
    wrk(svc.port, "/v1/check", batchLua, 2);
    if (svcRedis) wrk(svcRedis.port, "/v1/check", checkLua, 2);
    for (let r = 0; r < RUNS; r++) {
      // Rotate the order each run so no target always follows the same one.
      const order = [...http.slice(r % http.length), ...http.slice(0, r % http.length)];
      for (const c of order) (results[c.id] ??= []).push(c.run());
      const gorder = r % 2 ? [...grpcCases].reverse() : grpcCases;
      for (const c of gorder) (results[c.id] ??= []).push(await c.run());
      process.stdout.write(`run ${r + 1}/${RUNS} done\n`);
    }
  } finally {
    for (const p of [bare, bareGrpc, svc, svcRedis, redis]) p?.child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }

  const per = Object.fromEntries([...http, ...grpcCases].map((c) => [c.id, c.perReq ?? 1]));
  // Throughput in checks/s: requests/s times the checks each request carries.
  const med = (id, k) => median(results[id].map((x) => (k === "rps" ? x.rps * per[id] : x[k])));
  const spread = (id) => {
    const v = results[id].map((x) => x.rps * per[id]);
    return `${fmtRate(Math.min(...v))}-${fmtRate(Math.max(...v))}`;
  };
  const ceiling = med("bare", "rps");
  // Server CPU per check (us), and the ceiling's CPU per request over it: how many checks the
  // service answers per CPU-second relative to hello-world requests, independent of machine load.
  const cpu = (id) => median(results[id].map((x) => x.cpuUs / per[id]));
  const ceilingCpu = cpu("bare");
  const row = (c, base, baseCpu = ceilingCpu) => [
    c.label,
    fmtRate(med(c.id, "rps")),
    spread(c.id),
    `${((med(c.id, "rps") / base) * 100).toFixed(0)}%`,
    Number.isFinite(cpu(c.id)) ? cpu(c.id).toFixed(1) : "n/a",
    Number.isFinite(cpu(c.id)) ? `${((baseCpu / cpu(c.id)) * 100).toFixed(0)}%` : "n/a",
    med(c.id, "p50").toFixed(2),
    med(c.id, "p99").toFixed(2),
  ];
  const header = ["target", "checks/s (median)", "range", "of ceiling", "CPU us/check", "of ceiling (CPU)", "p50 ms", "p99 ms"];
  console.log(`\n${await machineLine()}`);
  console.log(
    `HTTP: wrk -t1 -c${CONNECTIONS} -d${DURATION_S}s --latency (keep-alive); gRPC: ${GRPC_CLIENTS} client processes x ${GRPC_CONCURRENCY} concurrent calls over ${CHANNELS} channels; latency is per request (a batch: all its checks); ${RUNS} runs, medians\n`,
  );
  const t1 = table(
    header,
    http.map((c) => row(c, ceiling)),
  );
  console.log(t1.text);
  // Each decision route against node:http answering the same bytes from constants (the "shape"
  // rows): what the service costs beyond the answer its contract fixes.
  const vsFloor = (id, floor) =>
    `${((med(id, "rps") / med(floor, "rps")) * 100).toFixed(0)}% of its req/s, ${((cpu(floor) / cpu(id)) * 100).toFixed(0)}% CPU-equivalent`;
  console.log(
    `\nagainst node:http answering the same bytes (made once): GET /v1/auth ${vsFloor("auth", "shape-auth")}; ` +
      `POST /v1/check ${vsFloor("check", "shape-check")}`,
  );
  console.log("");
  const t2 = table(
    header,
    // Each row against the bare server answering the same number of descriptors; rates are calls/s.
    grpcCases.map((c) => row(c, med(c.base ?? c.id, "rps"), cpu(c.base ?? c.id))),
  );
  console.log(t2.text);
  const non2xx = results.check.map((x) => x.non2xx).concat(results.auth.map((x) => x.non2xx));
  console.log(`\nnon-2xx answers over all runs (denials on /v1/auth are 429): ${non2xx.reduce((a, b) => a + b, 0)}`);
  if (argv.includes("--markdown")) console.log(`\n${t1.markdown}\n\n${t2.markdown}`);
}
