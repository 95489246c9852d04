/**
 * The middleware's `concurrency` option on every adapter, through real HTTP: at most `limit`
 * requests of a key in flight; the next one gets 429 (Retry-After: 1, its rate-limit charge given
 * back); a lease goes back when the response finishes, when the handler fails, and when the client
 * goes away mid-request (before the handler is done). Memory and Redis stores. No timings: the
 * handlers wait on the test's own gate.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConcurrencyLimiter, MemoryStore, RateLimiter, type Store } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { until } from "../../../test-support/process.js";
import { closer, listen } from "./http-gone-support.js";
import { httpAbandon, httpRequest } from "./http-support.js";

/** Handlers of `/hold` wait here until the test opens the gate. */
class Gate {
  holding = 0;
  private waiters: Array<() => void> = [];
  wait(): Promise<void> {
    this.holding++;
    return new Promise((r) => this.waiters.push(r));
  }
  open(): void {
    const w = this.waiters;
    this.waiters = [];
    this.holding -= w.length;
    for (const r of w) r();
  }
}

interface App {
  url: string;
  close(): Promise<void>;
}
type Options = Record<string, unknown>;

const FRAMEWORKS: Record<string, (options: Options, gate: Gate) => Promise<App>> = {
  async express(options, gate) {
    const express = (await import("express")).default;
    const { rateLimit } = await import("ratekeeper/express");
    const app = express();
    app.use(rateLimit(options as never));
    app.get("/", (_req, res) => void res.send("hello"));
    app.get("/hold", async (_req, res) => {
      await gate.wait();
      res.send("held");
    });
    app.get("/boom", () => {
      throw new Error("boom");
    });
    const server = http.createServer(app);
    return { url: await listen(server), close: closer(server) };
  },
  async fastify(options, gate) {
    const Fastify = (await import("fastify")).default;
    const { rateLimitPlugin } = await import("ratekeeper/fastify");
    const app = Fastify();
    await app.register(rateLimitPlugin, options as never);
    app.get("/", () => "hello");
    app.get("/hold", async () => {
      await gate.wait();
      return "held";
    });
    app.get("/boom", () => {
      throw new Error("boom");
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    const port = (app.server.address() as AddressInfo).port;
    return {
      url: `http://127.0.0.1:${port}`,
      close: async () => {
        app.server.closeAllConnections();
        await app.close();
      },
    };
  },
  async hono(options, gate) {
    const { Hono } = await import("hono");
    const { serve } = await import("@hono/node-server");
    const { rateLimit } = await import("ratekeeper/hono");
    const app = new Hono();
    app.use(rateLimit(options as never));
    app.get("/", (c) => c.text("hello"));
    app.get("/hold", async (c) => {
      await gate.wait();
      return c.text("held");
    });
    app.get("/boom", () => {
      throw new Error("boom");
    });
    const server = await new Promise<http.Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as http.Server));
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: closer(server) };
  },
  async node(options, gate) {
    const { withRateLimit } = await import("ratekeeper/node");
    const server = http.createServer(
      withRateLimit(options as never, async (req, res) => {
        if (req.url === "/hold") {
          await gate.wait();
          res.end("held");
        } else if (req.url === "/boom") {
          res.statusCode = 500;
          res.end("boom"); // node:http has no error middleware: the listener answers
        } else res.end("hello");
      }),
    );
    return { url: await listen(server), close: closer(server) };
  },
};

let seq = 0;

function suite(label: string, store: () => Store) {
  describe.each(Object.keys(FRAMEWORKS))(`%s [${label}]`, (name) => {
    const start = FRAMEWORKS[name] as (typeof FRAMEWORKS)[string];

    it("limit 2: a third request in flight gets 429 (Retry-After: 1); every lease comes back when the responses finish", async () => {
      const gate = new Gate();
      const pool = new ConcurrencyLimiter({ limit: 2, leaseMs: 60_000, store: store(), namespace: `h${++seq}` });
      const app = await start({ concurrency: pool }, gate);
      try {
        const first = [httpRequest(app.url, { path: "/hold" }), httpRequest(app.url, { path: "/hold" })];
        await until(() => gate.holding === 2, "two requests in flight", 400, 5);
        const refused = await httpRequest(app.url, { path: "/" });
        expect(refused.status).toBe(429);
        expect(refused.headers["retry-after"]).toBe("1");
        expect(JSON.parse(refused.body)).toMatchObject({ status: 429, "violated-policies": ["2-in-flight"] });
        gate.open();
        expect((await Promise.all(first)).map((r) => [r.status, r.body])).toEqual([
          [200, "held"],
          [200, "held"],
        ]);
        await until(async () => (await pool.peek("127.0.0.1")).remaining === 2, "both leases back", 200, 10);
        expect((await httpRequest(app.url, { path: "/" })).status).toBe(200);
        await until(async () => (await pool.peek("127.0.0.1")).remaining === 2, "the lease back", 200, 10);
      } finally {
        gate.open();
        await app.close();
      }
    });

    it("a client that goes away mid-request gives its slot back before the handler is done; a failing handler too", async () => {
      const gate = new Gate();
      const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 60_000, store: store(), namespace: `h${++seq}` });
      const app = await start({ concurrency: pool }, gate);
      try {
        await httpAbandon(app.url, { path: "/hold" }, () => gate.holding === 1);
        // The handler still waits on the gate, yet the slot is free again.
        await until(async () => (await pool.peek("127.0.0.1")).remaining === 1, "the abandoned request's lease back", 200, 10);
        expect(gate.holding).toBe(1);
        const boom = await httpRequest(app.url, { path: "/boom" });
        expect(boom.status).toBe(500);
        await until(async () => (await pool.peek("127.0.0.1")).remaining === 1, "the failed request's lease back", 200, 10);
        expect((await httpRequest(app.url, { path: "/" })).status).toBe(200);
      } finally {
        gate.open();
        await app.close();
      }
    });

    it("with a rate limit: a request refused for concurrency is not charged to the rate limit", async () => {
      const gate = new Gate();
      const ns = `h${++seq}`;
      const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 10, window: "1h", store: store(), namespace: ns });
      const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 60_000, store: store(), namespace: ns });
      const app = await start({ limiter, concurrency: pool }, gate);
      try {
        const held = httpRequest(app.url, { path: "/hold" });
        await until(() => gate.holding === 1, "one request in flight", 400, 5);
        const refused = await httpRequest(app.url, { path: "/" });
        expect(refused.status).toBe(429);
        expect(refused.headers["ratelimit"]).toBeDefined(); // the rate headers are sent with it
        await until(async () => (await limiter.peek("127.0.0.1")).remaining === 8, "the refused request's charge back", 200, 10);
        gate.open();
        expect((await held).status).toBe(200);
      } finally {
        gate.open();
        await app.close();
      }
    });

    it("with a shaping limit: a request waiting its turn holds its slot, so the next one past the slots gets 429 and its place back", async () => {
      const gate = new Gate();
      const ns = `h${++seq}`;
      // One request a minute, five in the queue: the second request waits a minute.
      const limiter = new RateLimiter({
        algorithm: "leaky-bucket",
        mode: "shape",
        limit: 1,
        window: "1m",
        capacity: 5,
        store: store(),
        namespace: ns,
      });
      const pool = new ConcurrencyLimiter({ limit: 2, leaseMs: 60_000, store: store(), namespace: ns });
      const app = await start({ limiter, concurrency: pool, maxDelayMs: 120_000 }, gate);
      const pending: Promise<unknown>[] = [];
      try {
        pending.push(httpRequest(app.url, { path: "/hold" }).catch(() => undefined));
        await until(() => gate.holding === 1, "the first request served", 400, 5);
        pending.push(httpRequest(app.url, { path: "/" }).catch(() => undefined));
        // The second request is queued (held a minute) and holds the other slot while it waits.
        await until(async () => (await pool.peek("127.0.0.1")).remaining === 0, "the queued request's slot", 200, 10);
        const queued = (await limiter.peek("127.0.0.1")).remaining;
        const refused = await httpRequest(app.url, { path: "/" });
        expect(refused.status).toBe(429);
        expect(JSON.parse(refused.body)).toMatchObject({ "violated-policies": ["2-in-flight"] });
        await until(async () => (await limiter.peek("127.0.0.1")).remaining === queued, "the refused request's place back", 200, 10);
      } finally {
        gate.open();
        await app.close();
        await Promise.all(pending);
      }
    });
  });
}

describe("middleware option concurrency", () => {
  suite("memory", () => new MemoryStore({ sweepIntervalMs: 0 }));

  it("is checked like every option: a bad concurrency names its field; limiter becomes optional", async () => {
    const { rateLimit } = await import("ratekeeper/node");
    expect(() => rateLimit({ concurrency: { limit: 0 } })).toThrow(/concurrency\.limit: must be a whole number/);
    expect(() => rateLimit({})).toThrow(/limiter: required/);
    expect(rateLimit({ concurrency: { limit: 3 } }).core.limiter).toBeUndefined();
  });
});

describeRedis("middleware option concurrency, Redis store", () => {
  let redis: RedisHandle;
  let client: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });
  suite("redis", () => new RedisStore({ client, failure: "throw", timeoutMs: 5_000 }));
});
