// The floors of the "http" section: what a middleware that does no limiting at all pays to send
// ratekeeper's bytes, per framework, so that ratekeeper's rows can also be read against them.
//
//   - "floor": the bare app plus a middleware that sets ratekeeper's two limit headers of an
//     admitted request (RateLimit-Policy, RateLimit), as constants, through the same per-header
//     setter ratekeeper's adapter uses on that framework;
//   - "floor-denied": the bare app answering every request with ratekeeper's 429 (status,
//     headers, problem+json body) as constants, written the way ratekeeper's adapter writes it
//     (one writeHead on node:http and Express, the headers then send() on Fastify, one Response
//     on Hono).
//
// The bytes are ratekeeper's own: the bench process captures them once from ratekeeper's
// node:http middleware, with the options the bench gives the other rows (RK), and hands them to
// the server processes; a change in what ratekeeper sends moves the floor with it. What ratekeeper
// costs beyond a floor is its decision and the building of per-request header values; the floor
// itself is what any limiter that sends these headers, or this 429, pays on that framework.

import http from "node:http";
import { once } from "node:events";

const HOP = new Set(["date", "connection", "keep-alive", "content-length", "transfer-encoding"]);

/** One answer of ratekeeper's node:http middleware after `n` requests: status, headers (lower case), body. */
async function grab(options, n) {
  const { withRateLimit } = await import("ratekeeper/node");
  const server = http.createServer(withRateLimit(options, (_req, res) => res.end("hello"))).listen(0, "127.0.0.1");
  await once(server, "listening");
  try {
    const url = `http://127.0.0.1:${server.address().port}/`;
    let res;
    for (let i = 0; i < n; i++) {
      res = await fetch(url);
      if (i < n - 1) await res.arrayBuffer();
    }
    const body = await res.text();
    return { status: res.status, headers: [...res.headers].filter(([k]) => !HOP.has(k)), body };
  } finally {
    server.close();
  }
}

/**
 * ratekeeper's answers for the floors: `allowed` = the limit headers of an admitted request
 * ([name, value] pairs), `denied` = the refusal ({ status, headers as an object, flat list, body }).
 */
export async function captureAnswers(rk) {
  const ok = await grab(rk.ratekeeper, 1);
  const no = await grab(rk["ratekeeper-denied"], 2); // the first request spends the limit of 1
  if (ok.status !== 200 || no.status !== 429) throw new Error(`http floors: expected 200 and 429, got ${ok.status} and ${no.status}`);
  const allowed = ok.headers.filter(([k]) => k.startsWith("ratelimit"));
  if (allowed.length === 0) throw new Error("http floors: ratekeeper's admitted answer had no limit headers");
  return {
    allowed,
    denied: { status: no.status, headers: Object.fromEntries(no.headers), flat: no.headers.flat(), body: no.body },
  };
}

/**
 * The floor apps' parts per framework: a middleware (or hook, or listener wrapper) for
 * `variant` ("floor" or "floor-denied"), given the captured answers.
 */
export const floorParts = {
  /** Express: per-header `res.setHeader`, or one `writeHead` of the whole 429. */
  express: (variant, a) =>
    variant === "floor"
      ? (_req, res, next) => {
          for (const [k, v] of a.allowed) res.setHeader(k, v);
          next();
        }
      : (_req, res) => res.writeHead(a.denied.status, a.denied.flat).end(a.denied.body),
  /**
   * Fastify: an onRequest hook, as ratekeeper's plugin: per-header `reply.header`, then for the
   * 429 `reply.code().type().send()` and no `done()` (Fastify's rule for hooks that answer).
   */
  fastify: (variant, a) => {
    if (variant === "floor")
      return (_req, reply, done) => {
        for (const [k, v] of a.allowed) reply.header(k, v);
        done();
      };
    const { "content-type": type, ...rest } = a.denied.headers;
    const pairs = Object.entries(rest);
    return (_req, reply) => {
      for (const [k, v] of pairs) reply.header(k, v);
      reply.code(a.denied.status).type(type).send(a.denied.body);
    };
  },
  /** node:http: a listener wrapper; per-header `setHeader`, or one `writeHead` of the 429. */
  node: (variant, a, hello) =>
    variant === "floor"
      ? (req, res) => {
          for (const [k, v] of a.allowed) res.setHeader(k, v);
          hello(req, res);
        }
      : (_req, res) => res.writeHead(a.denied.status, a.denied.flat).end(a.denied.body),
  /** Hono on @hono/node-server: `setHeader` on the Node response, or one `Response`. */
  hono: (variant, a) =>
    variant === "floor"
      ? (c, next) => {
          const out = c.env.outgoing;
          for (const [k, v] of a.allowed) out.setHeader(k, v);
          return next().then(() => undefined);
        }
      : () => new Response(a.denied.body, { status: a.denied.status, headers: a.denied.headers }),
};
