// One whole HTTP request through a framework, in process: a real IncomingMessage (its headers
// parsed as node's parser leaves them) and a fresh ServerResponse per request, the framework's
// own request handler, and the response written in full (status line and headers serialised by
// node) except for the socket write, which is stubbed (the same for every variant). Used by
// bench/overhead.js, one process per case and round, so one case's JIT state cannot colour another's:
//   node bench/lib/http-inproc.js <hono|fastify|node> <bare|allowed|refused> <requests> <rounds>
// prints the least CPU ns per request over the rounds and the last response's status line.
//
// Frameworks: Hono through @hono/node-server's request listener (as `serve()` runs it), Fastify
// through its router (`app.routing`, what its server's 'request' handler calls), node:http
// through ratekeeper/node's withRateLimit. The app answers GET / with "hello"; ratekeeper has one
// fixed-window limit with its default IETF headers: 10^9 per minute (allowed) or 1 per hour
// (refused: every request after the first is answered 429).

import http from "node:http";
import net from "node:net";

const POLICY = { algorithm: "fixed-window", limit: 1_000_000_000, window: "1m" };
const OPTIONS = { allowed: { limiter: POLICY }, refused: { limiter: { ...POLICY, limit: 1, window: "1h" } } };
const socket = new net.Socket();
Object.defineProperty(socket, "remoteAddress", { value: "127.0.0.1" });
let sink = 0;

/** A GET / as node's parser hands it over (headers left for node to build lazily). */
function incoming() {
  const req = new http.IncomingMessage(socket);
  req.method = "GET";
  req.url = "/";
  req.httpVersion = "1.1";
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req._addHeaderLines(["Host", "127.0.0.1:3000", "User-Agent", "autocannon", "Accept", "*/*"], 6);
  req.complete = true;
  req.push(null);
  return req;
}

/**
 * A response whose bytes go nowhere: writeHead and the header serialisation still run. `ended`,
 * when given, is called after `end()` (with no socket, node never emits 'finish').
 */
function outgoing(req, ended) {
  const res = new http.ServerResponse(req);
  res._send = (data) => {
    sink += data.length;
    return true;
  };
  if (ended !== undefined) {
    const end = res.end;
    res.end = function (...args) {
      const r = end.apply(this, args);
      ended();
      return r;
    };
  }
  return res;
}

/** Builds `() => Promise<ServerResponse>` for one framework and variant. */
async function build(framework, variant) {
  const options = OPTIONS[variant];
  if (framework === "hono") {
    const { Hono } = await import("hono");
    const { getRequestListener } = await import("@hono/node-server");
    const app = new Hono();
    if (options !== undefined) app.use((await import("ratekeeper/hono")).rateLimit(options));
    app.get("/", (c) => c.text("hello"));
    const listener = getRequestListener(app.fetch);
    return async () => {
      const req = incoming();
      const res = outgoing(req);
      await listener(req, res);
      return res;
    };
  }
  if (framework === "fastify") {
    const Fastify = (await import("fastify")).default;
    const app = Fastify();
    if (options !== undefined) await app.register((await import("ratekeeper/fastify")).rateLimitPlugin, options);
    app.get("/", async () => "hello");
    await app.ready();
    return () =>
      new Promise((resolve) => {
        const req = incoming();
        const res = outgoing(req, () => resolve(res));
        app.routing(req, res);
      });
  }
  const hello = (_req, res) => res.end("hello");
  const listener = options === undefined ? hello : (await import("ratekeeper/node")).withRateLimit(options, hello);
  return () => {
    const req = incoming();
    const res = outgoing(req);
    listener(req, res);
    return Promise.resolve(res);
  };
}

const [framework, variant, n = "20000", rounds = "5"] = process.argv.slice(2);
const run = await build(framework, variant);
for (let i = 0; i < 2000; i++) await run();
let least = Infinity;
let last;
for (let r = 0; r < Number(rounds); r++) {
  const c0 = process.cpuUsage();
  for (let i = 0; i < Number(n); i++) last = await run();
  const c = process.cpuUsage(c0);
  least = Math.min(least, ((c.user + c.system) * 1000) / Number(n));
}
console.log(JSON.stringify({ ns: least, status: last.statusCode, sink: sink > 0 }));
