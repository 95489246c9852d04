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
// Floors, what any middleware pays there whatever it does: `empty` (a middleware/hook that only
// passes the request on), `headers` (the same setting two constant headers of ratekeeper's sizes
// the way the adapter does) and `const429` (a constant refusal as big as ratekeeper's: four
// headers and the same 229-byte body).

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

const BODY = JSON.stringify({
  type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
  title: "Too Many Requests",
  status: 429,
  detail: "Rate limit exceeded (1-per-1h); retry after 3600 s.",
  "retry-after": 3600,
  "violated-policies": ["1-per-1h"],
});
const POLICY_HEADER = ["ratelimit-policy", '"1000000000-per-1m";q=1000000000;w=60'];
const RATELIMIT_HEADER = ["ratelimit", '"1000000000-per-1m";r=999999999;t=42'];
/** A constant refusal's headers (fresh per request, as a real one's). */
const refusalHeaders = () => ({
  "content-type": "application/problem+json",
  "ratelimit-policy": '"1-per-1h";q=1;w=3600',
  ratelimit: '"1-per-1h";r=0;t=3600',
  "retry-after": "3600",
});

/** The floor middlewares (see the header), per framework. */
const FLOORS = {
  hono: {
    empty: (c, next) => next().then(() => undefined),
    headers: (c, next) => {
      c.env.outgoing.setHeader(...POLICY_HEADER);
      c.env.outgoing.setHeader(...RATELIMIT_HEADER);
      return next().then(() => undefined);
    },
    const429: () => Promise.resolve(new Response(BODY, { status: 429, headers: refusalHeaders() })),
  },
  fastify: {
    empty: (req, reply, done) => done(),
    headers: (req, reply, done) => {
      reply.header(...POLICY_HEADER);
      reply.header(...RATELIMIT_HEADER);
      done();
    },
    const429: (req, reply) => void reply.code(429).headers(refusalHeaders()).send(BODY),
  },
  node: {
    empty: (listener) => (req, res) => listener(req, res),
    headers: (listener) => (req, res) => {
      res.setHeader(...POLICY_HEADER);
      res.setHeader(...RATELIMIT_HEADER);
      listener(req, res);
    },
    const429: () => (req, res) => {
      const h = refusalHeaders();
      res.writeHead(
        429,
        Object.keys(h).flatMap((k) => [k, h[k]]),
      );
      res.end(BODY);
    },
  },
};

/** Builds `() => Promise<ServerResponse>` for one framework and variant. */
async function build(framework, variant) {
  const options = OPTIONS[variant];
  if (framework === "hono") {
    const { Hono } = await import("hono");
    const { getRequestListener } = await import("@hono/node-server");
    const app = new Hono();
    if (FLOORS.hono[variant] !== undefined) app.use(FLOORS.hono[variant]);
    else if (options !== undefined) app.use((await import("ratekeeper/hono")).rateLimit(options));
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
    if (FLOORS.fastify[variant] !== undefined) app.addHook("onRequest", FLOORS.fastify[variant]);
    else if (options !== undefined) await app.register((await import("ratekeeper/fastify")).rateLimitPlugin, options);
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
  const listener =
    FLOORS.node[variant] !== undefined
      ? FLOORS.node[variant](hello)
      : options === undefined
        ? hello
        : (await import("ratekeeper/node")).withRateLimit(options, hello);
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
