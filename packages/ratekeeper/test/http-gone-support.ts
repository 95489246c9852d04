/**
 * The servers of the "client gone" tests (http-concurrency-gone, http-shaping-gone): one app per
 * adapter (express, fastify, hono on @hono/node-server, node:http) with the given middleware
 * options and one route, `/`, that answers "hello". Each reports how many of its responses have
 * closed (the client gone, or the response done) and how many requests reached the route.
 */
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";

/** A server, and how many of its responses have closed (the client gone, or the response done). */
export interface App {
  url: string;
  closed: () => number;
  served: () => number;
  close(): Promise<void>;
}

function watch(server: http.Server, url: string, served: () => number, close: () => Promise<void>): App {
  let closed = 0;
  // A second 'request' listener only watches: the framework's own listener answers.
  server.on("request", (_req: http.IncomingMessage, res: http.ServerResponse) => res.once("close", () => closed++));
  return { url, closed: () => closed, served, close };
}

/** Listens on a free loopback port; resolves with the base URL. */
export async function listen(server: http.Server): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes the server and every connection it holds. */
export function closer(server: http.Server): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
}

export const FRAMEWORKS: Record<string, (options: Record<string, unknown>) => Promise<App>> = {
  async express(options) {
    const express = (await import("express")).default;
    const { rateLimit } = await import("ratekeeper/express");
    let served = 0;
    const app = express();
    app.use(rateLimit(options as never));
    app.get("/", (_req, res) => {
      served++;
      res.send("hello");
    });
    const server = http.createServer(app);
    return watch(server, await listen(server), () => served, closer(server));
  },
  async fastify(options) {
    const Fastify = (await import("fastify")).default;
    const { rateLimitPlugin } = await import("ratekeeper/fastify");
    let served = 0;
    const app = Fastify();
    await app.register(rateLimitPlugin, options as never);
    app.get("/", () => {
      served++;
      return "hello";
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    return watch(
      app.server,
      url,
      () => served,
      async () => {
        app.server.closeAllConnections();
        await app.close();
      },
    );
  },
  async hono(options) {
    const { Hono } = await import("hono");
    const { serve } = await import("@hono/node-server");
    const { rateLimit } = await import("ratekeeper/hono");
    let served = 0;
    const app = new Hono();
    app.use(rateLimit(options as never));
    app.get("/", (c) => {
      served++;
      return c.text("hello");
    });
    const server = await new Promise<http.Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as http.Server));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return watch(server, url, () => served, closer(server));
  },
  async node(options) {
    const { withRateLimit } = await import("ratekeeper/node");
    let served = 0;
    const server = http.createServer(
      withRateLimit(options as never, (_req, res) => {
        served++;
        res.end("hello");
      }),
    );
    return watch(server, await listen(server), () => served, closer(server));
  },
};
