/**
 * HTTP/1.1 pipelining: a client sends two requests on one connection before reading any answer.
 * node parses both; the second's response waits, not attached to the socket, until the first is
 * answered, and it never emits 'close' when the client goes away. A shaped request held there
 * (leaky bucket `mode: "shape"`, a delay of an hour) must still give its place in the queue back
 * when the connection closes, as docs/middleware.md says of a client that disconnects while held,
 * rather than keep it for the whole delay and then run the handler for nobody. On node:http,
 * Express, Fastify and Hono on @hono/node-server.
 */
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { RateLimiter } from "ratekeeper";
import { until } from "../../../test-support/process.js";
import { loopbackServers } from "./http-support.js";

const listen = loopbackServers();

/** The request handlers of each adapter: `/hang` never answers, anything else answers "ok" (counted). */
const APPS: Record<string, (limiter: RateLimiter, served: { n: number }) => Promise<string>> = {
  async node(limiter, served) {
    const { rateLimit } = await import("ratekeeper/node");
    const limit = rateLimit({ limiter, key: () => "k", maxDelayMs: 86_400_000 });
    return listen(
      http.createServer((req, res) => {
        void limit(req, res).then((ok) => {
          if (!ok || req.url === "/hang") return;
          served.n++;
          res.end("ok");
        });
      }),
    );
  },
  async express(limiter, served) {
    const express = (await import("express")).default;
    const { rateLimit } = await import("ratekeeper/express");
    const app = express();
    app.use(rateLimit({ limiter, key: () => "k", maxDelayMs: 86_400_000 }));
    app.get("/hang", () => {});
    app.get("/second", (_req, res) => {
      served.n++;
      res.send("ok");
    });
    return listen(http.createServer(app));
  },
  async fastify(limiter, served) {
    const Fastify = (await import("fastify")).default;
    const { rateLimitHook } = await import("ratekeeper/fastify");
    const app = Fastify();
    app.addHook("onRequest", rateLimitHook({ limiter, key: () => "k", maxDelayMs: 86_400_000 }));
    app.get("/hang", () => new Promise(() => {}));
    app.get("/second", () => {
      served.n++;
      return "ok";
    });
    await app.ready();
    listen.track(app.server);
    await app.listen({ port: 0, host: "127.0.0.1" });
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  },
};

APPS.hono = async (limiter, served) => {
  const { Hono } = await import("hono");
  const { serve } = await import("@hono/node-server");
  const { rateLimit } = await import("ratekeeper/hono");
  const app = new Hono();
  app.use(rateLimit({ limiter, key: () => "k", maxDelayMs: 86_400_000 }));
  app.get("/hang", () => new Promise<Response>(() => {}));
  app.get("/second", (c) => {
    served.n++;
    return c.text("ok");
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as http.Server;
  listen.track(server);
  await new Promise((r) => server.once("listening", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

describe.each(Object.keys(APPS))("%s: a pipelined request held for shaping, the client gone", (name) => {
  it("gives its place in the queue back at once (the delay is an hour)", async () => {
    const limiter = new RateLimiter({ algorithm: "leaky-bucket", mode: "shape", limit: 1, window: "1h", capacity: 10 });
    const served = { n: 0 };
    const url = new URL(await (APPS[name] as (typeof APPS)[string])(limiter, served));
    const socket = net.connect(Number(url.port), url.hostname);
    socket.on("error", () => {});
    socket.write("GET /hang HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n");
    // The first takes the queue's head (no wait, then hangs); the second is held for an hour.
    await until(async () => (await limiter.peek("k")).remaining === 7, "both requests admitted", 400, 5);
    socket.destroy();
    await until(async () => (await limiter.peek("k")).remaining === 8, "the held place given back", 200, 10);
    expect(served.n).toBe(0);
  });
});
