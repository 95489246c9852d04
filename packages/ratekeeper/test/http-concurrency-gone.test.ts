/**
 * The middleware's `concurrency` option when the client goes away while its lease is being
 * acquired (a store that answers slowly: Redis under load): by the time the lease is granted, the
 * response has already closed. The lease must go back all the same, on every adapter through real
 * HTTP. No timings: the store's acquire waits on the test's own gate until the server has seen
 * the connection close.
 */
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { ConcurrencyLimiter, MemoryStore, type Store } from "ratekeeper";
import type { BoundLeases, ClockOptions, LeaseAnswer } from "../src/store.js";
import { until } from "../../../test-support/process.js";
import { httpAbandon } from "./http-support.js";

/** A memory store whose lease acquires wait for `open()` (one gate for all of them). */
class SlowLeases implements Store {
  private readonly inner = new MemoryStore({ sweepIntervalMs: 0 });
  waiting = 0;
  /** Acquires answered, and granted. */
  answered = 0;
  granted = 0;
  private waiters: Array<() => void> = [];

  bind(...a: Parameters<MemoryStore["bind"]>): ReturnType<MemoryStore["bind"]> {
    return this.inner.bind(...a);
  }

  bindLeases(limit: number, namespace: string, options?: ClockOptions): BoundLeases {
    const b = this.inner.bindLeases(limit, namespace, options);
    return {
      acquire: async (key, id, leaseMs, nowMs): Promise<LeaseAnswer> => {
        this.waiting++;
        await new Promise<void>((r) => this.waiters.push(r));
        this.waiting--;
        const a = await b.acquire(key, id, leaseMs, nowMs);
        this.answered++;
        if (a.ok) this.granted++;
        return a;
      },
      renew: (...a) => b.renew(...a),
      release: (...a) => b.release(...a),
      count: (...a) => b.count(...a),
    };
  }

  open(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}

/** A server, and how many of its responses have closed (the client gone, or the response done). */
interface App {
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

async function listen(server: http.Server): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closer(server: http.Server): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
}

const FRAMEWORKS: Record<string, (options: Record<string, unknown>) => Promise<App>> = {
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

let seq = 0;

describe.each(Object.keys(FRAMEWORKS))("%s: concurrency, the client gone while its lease was acquired", (name) => {
  it("the lease goes back once granted", async () => {
    const store = new SlowLeases();
    const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 3_600_000, store, namespace: `g${++seq}` });
    const app = await (FRAMEWORKS[name] as (typeof FRAMEWORKS)[string])({ concurrency: pool });
    try {
      await httpAbandon(app.url, {}, () => store.waiting === 1);
      await until(() => app.closed() === 1, "the server to see the client gone", 400, 5);
      store.open();
      await until(() => store.answered === 1, "the acquire to be answered", 400, 5);
      expect(store.granted).toBe(1); // granted after the client left
      // The lease is granted after the client left; whether or not the handler then runs, the
      // slot must come back (not an hour later, when the lease expires).
      await until(async () => (await pool.peek("127.0.0.1")).remaining === 1, "the lease back", 200, 10);
      expect(app.served()).toBeLessThanOrEqual(1);
    } finally {
      store.open();
      await app.close();
    }
  });
});
