/**
 * node:http2's compatibility API (`http2.createServer((req, res) => ...)`, what
 * `Fastify({ http2: true })` and @hono/node-server's `createServer: http2.createServer` run on)
 * when the client cancels its stream while the verdict is being made (a store that answers
 * slowly: Redis under load). Its response has no `closed` flag as node:http's has, and its
 * 'close' has fired already: the lease taken for the request (option `concurrency`) must still go
 * back, and a shaped request's place in the queue too, rather than be held for good (a lease in
 * flight is renewed until released) or for the whole delay. No timings: the store waits on the
 * test's own gate until the server has seen the stream close.
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { ConcurrencyLimiter } from "ratekeeper";
import { until } from "../../../test-support/process.js";
import { SlowDecisions } from "../../../test-support/slow-decisions.js";
import { SlowLeases } from "../../../test-support/slow-leases.js";

/** A server on the HTTP/2 compatibility API, how many of its responses closed, how many were served. */
interface App {
  url: string;
  closed: () => number;
  served: () => number;
  close(): Promise<void>;
}

function watch(server: http2.Http2Server, served: () => number, close: () => Promise<void>): App {
  let closed = 0;
  server.on("request", (_req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => res.once("close", () => closed++));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, closed: () => closed, served, close };
}

async function listen(server: http2.Http2Server): Promise<void> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
}

const APPS: Record<string, (options: Record<string, unknown>) => Promise<App>> = {
  async node(options) {
    const { rateLimit } = await import("ratekeeper/node");
    const limit = rateLimit(options);
    let served = 0;
    const server = http2.createServer((req, res) => {
      void limit(req as never, res as never).then((ok) => {
        if (!ok) return;
        served++;
        res.end("hello");
      });
    });
    await listen(server);
    return watch(
      server,
      () => served,
      () => new Promise((r) => server.close(() => r())),
    );
  },
  async fastify(options) {
    const Fastify = (await import("fastify")).default;
    const { rateLimitPlugin } = await import("ratekeeper/fastify");
    let served = 0;
    const app = Fastify({ http2: true });
    await app.register(rateLimitPlugin, options as never);
    app.get("/", () => {
      served++;
      return "hello";
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    return watch(
      app.server,
      () => served,
      () => app.close(),
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
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1", createServer: http2.createServer });
    await new Promise((r) => server.once("listening", r));
    return watch(
      server as http2.Http2Server,
      () => served,
      () => new Promise((r) => server.close(() => r())),
    );
  },
};

/** The status of a GET of `url` over HTTP/2. */
async function statusOf(url: string): Promise<number> {
  const session = http2.connect(url);
  try {
    return await new Promise<number>((resolve, reject) => {
      const stream = session.request({ ":path": "/" });
      stream.on("response", (h) => resolve(Number(h[":status"])));
      stream.on("error", reject);
      stream.resume();
    });
  } finally {
    session.close();
  }
}

/** Opens a stream to `url` and cancels it once `when()` holds; resolves when it is gone. */
async function cancelWhen(url: string, when: () => boolean): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url);
  session.on("error", () => {});
  const stream = session.request({ ":path": "/" });
  stream.on("error", () => {});
  await until(when, "the request to reach the store", 400, 5);
  stream.close(http2.constants.NGHTTP2_CANCEL);
  return session;
}

let seq = 0;

describe.each(Object.keys(APPS))("%s on node:http2: the client gone while its verdict was made", (name) => {
  const start = APPS[name] as (typeof APPS)[string];

  it("concurrency: the lease goes back once granted", async () => {
    const store = new SlowLeases();
    const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 3_600_000, store, namespace: `h2g${++seq}` });
    const app = await start({ concurrency: pool });
    const session = await cancelWhen(app.url, () => store.waiting === 1);
    try {
      await until(() => app.closed() === 1, "the server to see the stream gone", 400, 5);
      store.open();
      await until(() => store.answered === 1, "the acquire to be answered", 400, 5);
      expect(store.granted).toBe(1);
      await until(async () => (await pool.peek("127.0.0.1")).remaining === 1, "the lease back", 200, 10);
    } finally {
      store.open();
      session.destroy();
      await app.close();
    }
  });

  it("shaping: the place in the queue goes back at once (the delay is an hour)", async () => {
    const store = new SlowDecisions();
    const limiter = { algorithm: "leaky-bucket", mode: "shape", limit: 1, window: "1h", capacity: 10, store, namespace: `h2s${++seq}` };
    const app = await start({ limiter, maxDelayMs: 86_400_000 });
    expect(await statusOf(app.url)).toBe(200); // the first: no wait; the next would wait an hour
    store.gated = true;
    const session = await cancelWhen(app.url, () => store.waiting === 1);
    try {
      await until(() => app.closed() === 2, "the server to see the stream gone", 400, 5);
      store.open();
      await until(() => store.refunds === 1, "the place given back", 400, 5);
      expect(app.served()).toBe(1);
    } finally {
      store.open();
      session.destroy();
      await app.close();
    }
  });
});
