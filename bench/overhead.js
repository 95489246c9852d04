// Bench section "overhead": the CPU time ratekeeper itself adds to one request, measured in
// process, without sockets, so that the noise of a shared machine (which decides most of the
// http and service sections' requests/s) does not hide a difference of a few hundred ns:
//   - ratekeeper/node's withRateLimit around a listener that does nothing, called with real
//     IncomingMessage / ServerResponse objects (reused, so their construction is not counted):
//     allowed with the default IETF headers, allowed with `headers: false`, and refused (429;
//     writeHead and end stubbed, as the socket write is node's cost, not ours);
//   - the decision service's GET /v1/auth work without the socket: the query parsed into a
//     check, the decision through DecisionService (memory store, examples/rules.yaml, 1,000
//     keys), and the limit headers rendered;
//   - the decision service's POST /v1/check work for one check without the socket: the body (a
//     Buffer, as node hands it over) parsed and validated, the decision, the JSON answer and the
//     limit headers rendered.
// Each case runs `--rounds` rounds of `--n` calls, interleaved with the bare listener; quoted:
// the median and the least CPU time (process.cpuUsage) per call over the rounds.
//
// A second table: one whole request through each framework in process (bench/lib/http-inproc.js:
// real request/response objects, the response serialised, the socket write stubbed): bare,
// ratekeeper admitting, ratekeeper refusing (429), for Hono on @hono/node-server's listener,
// Fastify's router and node:http. Each (case, round) runs in a process of its own, in a rotating
// order, `--http-rounds` rounds; quoted: medians, and ratekeeper's extra CPU over the bare
// framework in the same round.
//
// Usage: node bench/overhead.js [--rounds 15] [--n 300000] [--http-rounds 5] [--http-n 20000] [--no-http]
// (`npm run bench -- overhead`). To compare two versions, run it in both checkouts one after the
// other, twice, interleaved.

import { execFileSync } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { withRateLimit } from "ratekeeper/node";
import { MemoryStore } from "ratekeeper";
import { machineLine, table } from "./lib/format.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : dflt;
};
const ROUNDS = opt("--rounds", 15);
const N = opt("--n", 300_000);
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const server = (p) => import(join(root, "packages/server/dist", p));

let sink = 0;
/** CPU ns per call of `fn(i)` over N calls. */
function cpuNsPerCall(fn) {
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) fn(i);
  const c = process.cpuUsage(c0);
  return ((c.user + c.system) * 1000) / N;
}

/** 64 request/response pairs from one peer address, reused round-robin. */
function requests(refused) {
  const writeHead = function (status, headers) {
    this.statusCode = status;
    sink += headers.length;
    return this;
  };
  const end = function () {
    return this;
  };
  return Array.from({ length: 64 }, () => {
    const socket = new net.Socket();
    Object.defineProperty(socket, "remoteAddress", { value: "127.0.0.1" });
    const req = new http.IncomingMessage(socket);
    req.method = "GET";
    req.url = "/";
    const res = new http.ServerResponse(req);
    if (refused) Object.assign(res, { writeHead, end });
    return [req, res];
  });
}

const listener = () => {
  sink++;
};
const policy = (limit) => ({ algorithm: "fixed-window", limit, window: "1h" });
const cases = [];
for (const [label, options, refused] of [
  ["node:http middleware, allowed, IETF headers", { limiter: policy(1e9) }, false],
  ["node:http middleware, allowed, headers: false", { limiter: policy(1e9), headers: false }, false],
  ["node:http middleware, refused (429)", { limiter: policy(1) }, true],
]) {
  const pool = requests(refused);
  const wrapped = withRateLimit(options, listener);
  const bare = (i) => listener(pool[i & 63][0], pool[i & 63][1]);
  cases.push({ label, run: (i) => wrapped(pool[i & 63][0], pool[i & 63][1]), bare });
}

// The service's /v1/auth work, the socket left out.
const { loadRulesFile } = await server("config/load.js");
const { DecisionService } = await server("service/decide.js");
const { authInput, Query } = await server("transport/check-input.js");
const { limitHeaders } = await server("transport/render.js");
const svc = new DecisionService({ store: new MemoryStore(), rules: loadRulesFile(join(root, "examples/rules.yaml")) });
const queries = Array.from({ length: 1000 }, (_, i) => `domain=api&d=user_id%3D${i}`);
const headers = { host: "127.0.0.1" };
// decideNow answers synchronously on the memory store; an older build has only decide (a promise).
const decide = typeof svc.decideNow === "function" ? (input) => svc.decideNow(input) : undefined;
if (decide !== undefined) {
  cases.push({
    label: "service GET /v1/auth work (query, decision, headers)",
    run: (i) => {
      const { input } = authInput(new Query(queries[i % 1000]), headers);
      const r = decide(input);
      sink += Object.keys(limitHeaders(r.statuses)).length;
    },
    bare: () => sink++,
  });
}

// The service's POST /v1/check work for one check, the socket left out. Keys cycle over 100,000
// user ids (as the service section's wrk load): with 1,000, every check past the 100th per key
// would be a denial.
const { toInput } = await server("transport/check-input.js");
const { resultJson, limitHeaderList } = await server("transport/render.js");
const bodies = Array.from({ length: 100_000 }, (_, i) => Buffer.from(`{"domain":"api","descriptors":[{"user_id":"${i}"}]}`));
// An older build has no limitHeaderList: the headers object, as it rendered them then. One styles
// list for every call, as the server has (the header writers are cached per list).
const STYLES = ["ietf"];
const headerCount = limitHeaderList
  ? (r) => limitHeaderList(r.statuses, STYLES, []).length
  : (r) => Object.keys(limitHeaders(r.statuses)).length;
if (decide !== undefined) {
  let k = 0;
  cases.push({
    label: "service POST /v1/check work (body, decision, JSON, headers)",
    run: () => {
      const body = JSON.parse(bodies[k++ % 100_000].toString("utf8"));
      const r = decide(toInput(body, ""));
      sink += resultJson(r).length + headerCount(r);
    },
    bare: () => sink++,
  });
}

console.log(`overhead: ${await machineLine()}`);
console.log(`${ROUNDS} rounds of ${N} calls per case, interleaved with a bare call; CPU time (process.cpuUsage)\n`);
const rows = [];
for (const c of cases) {
  const ours = [];
  const bare = [];
  for (let r = 0; r < ROUNDS; r++) {
    bare.push(cpuNsPerCall(c.bare));
    ours.push(cpuNsPerCall(c.run));
  }
  ours.sort((a, b) => a - b);
  bare.sort((a, b) => a - b);
  rows.push([c.label, ours[ROUNDS >> 1].toFixed(0), ours[0].toFixed(0), bare[ROUNDS >> 1].toFixed(0)]);
}
if (decide === undefined) console.log("(this build has no DecisionService.decideNow: the service row is left out)");
const t = table(["case", "CPU ns/call (median)", "least", "bare call (median)"], rows);
console.log(t.text);
if (args.includes("--markdown")) console.log(`\n${t.markdown}`);
if (!args.includes("--no-http")) frameworkTable(opt("--http-rounds", 5), opt("--http-n", 20_000), args.includes("--http-floors"));
if (sink === -1) console.log(sink);

/** The whole-request table (see the header): one process per case and round. */
function frameworkTable(rounds, n, floors) {
  const script = join(root, "bench/lib/http-inproc.js");
  const variants = ["bare", "allowed", "refused", ...(floors ? ["empty", "headers", "const429"] : [])];
  const cases = ["hono", "fastify", "node"].flatMap((fw) => variants.map((v) => [fw, v]));
  const ns = new Map(cases.map(([fw, v]) => [`${fw} ${v}`, []]));
  for (let r = 0; r < rounds; r++) {
    const order = cases.map((_, i) => cases[(i + r) % cases.length]);
    if (r % 2 === 1) order.reverse();
    for (const [fw, v] of order) {
      const out = execFileSync(process.execPath, ["--max-semi-space-size=32", script, fw, v, String(n), "3"], { encoding: "utf8" });
      const got = JSON.parse(out);
      if (got.status !== (v === "refused" || v === "const429" ? 429 : 200)) throw new Error(`${fw} ${v}: answered ${got.status}`);
      ns.get(`${fw} ${v}`).push(got.ns);
    }
  }
  const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  const frows = ["hono", "fastify", "node"].map((fw) => {
    const bare = ns.get(`${fw} bare`);
    const extra = (v) => {
      const x = median(ns.get(`${fw} ${v}`).map((y, i) => y - bare[i]));
      return `${x >= 0 ? "+" : ""}${x.toFixed(0)}`;
    };
    const share = (v) => `${((100 * median(bare)) / median(ns.get(`${fw} ${v}`))).toFixed(0)}%`;
    return [
      fw,
      median(bare).toFixed(0),
      median(ns.get(`${fw} allowed`)).toFixed(0),
      extra("allowed"),
      share("allowed"),
      median(ns.get(`${fw} refused`)).toFixed(0),
      extra("refused"),
      share("refused"),
    ];
  });
  console.log(
    `\nOne whole request in process, ${rounds} rounds of ${n} requests per case (least of 3 runs per process), CPU ns per request (medians):`,
  );
  const ft = table(["framework", "bare", "allowed", "over bare", "bare/allowed", "refused (429)", "over bare", "bare/refused"], frows);
  console.log(ft.text);
  if (args.includes("--markdown")) console.log(`\n${ft.markdown}`);
  if (!floors) return;
  // What any middleware pays there (see bench/lib/http-inproc.js): the floor under ratekeeper's rows.
  const over = (fw, v) => {
    const bare = ns.get(`${fw} bare`);
    const x = median(ns.get(`${fw} ${v}`).map((y, i) => y - bare[i]));
    return `${x >= 0 ? "+" : ""}${x.toFixed(0)}`;
  };
  const lrows = ["hono", "fastify", "node"].map((fw) => [
    fw,
    over(fw, "empty"),
    over(fw, "headers"),
    over(fw, "allowed"),
    over(fw, "const429"),
    over(fw, "refused"),
  ]);
  const lt = table(
    ["framework", "pass-through", "+ 2 constant headers", "ratekeeper allowed", "constant 429", "ratekeeper refused"],
    lrows,
  );
  console.log("\nFloors: CPU ns per request over the bare framework in the same round (medians):");
  console.log(lt.text);
  if (args.includes("--markdown")) console.log(`\n${lt.markdown}`);
}
