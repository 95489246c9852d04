/**
 * The middleware's `concurrency` option with a request that stays in flight longer than the
 * lease (a long download, a slow upstream): the middleware keeps its lease alive (renews it every
 * third of `leaseMs`) until the response is done, so the slot is not granted again while the
 * request still runs. Through real HTTP; the pool's clock is injected and the keep-alive's
 * interval timer faked (sockets keep their own timers), so no time passes for real.
 */
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ConcurrencyLimiter, MemoryStore } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { until } from "../../../test-support/process.js";
import { httpRequest } from "./http-support.js";
import { outageClient } from "./redis-store-support.js";

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

async function listen(server: http.Server): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const FRAMEWORKS: Record<string, (options: Record<string, unknown>, gate: Gate) => Promise<http.Server>> = {
  async node(options, gate) {
    const { withRateLimit } = await import("ratekeeper/node");
    return http.createServer(
      withRateLimit(options as never, async (req, res) => {
        if (req.url === "/hold") await gate.wait();
        res.end("done");
      }),
    );
  },
  async express(options, gate) {
    const express = (await import("express")).default;
    const { rateLimit } = await import("ratekeeper/express");
    const app = express();
    app.use(rateLimit(options as never));
    app.get("/hold", async (_req, res) => {
      await gate.wait();
      res.send("done");
    });
    app.get("/", (_req, res) => void res.send("done"));
    return http.createServer(app);
  },
};

afterEach(() => {
  vi.useRealTimers();
});

describe.each(Object.keys(FRAMEWORKS))("%s: concurrency, a request longer than its lease", (name) => {
  it("keeps its slot until it is done: the lease is renewed while the request runs", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const gate = new Gate();
    const clock = { now: 1_763_740_800_000 };
    const pool = new ConcurrencyLimiter({
      limit: 1,
      leaseMs: 30_000,
      store: new MemoryStore({ sweepIntervalMs: 0 }),
      clock: () => clock.now,
    });
    const server = await (FRAMEWORKS[name] as (typeof FRAMEWORKS)[string])({ concurrency: pool }, gate);
    const url = await listen(server);
    try {
      const long = httpRequest(url, { path: "/hold" });
      long.catch(() => undefined); // the server is closed under it if an expectation fails
      await until(() => gate.holding === 1, "the request in flight", 400, 5);
      for (let t = 0; t < 12; t++) {
        // Two minutes in steps of 10 s, four times the lease: the keep-alive renews it each step.
        clock.now += 10_000;
        vi.advanceTimersByTime(10_000);
        await new Promise((r) => setImmediate(r));
      }
      expect((await httpRequest(url, { path: "/" })).status).toBe(429); // still in flight: still held
      gate.open();
      expect((await long).status).toBe(200);
      await until(async () => (await pool.peek("127.0.0.1")).remaining === 1, "the lease back", 200, 10);
      // Released: the keep-alive stopped with it (no renew brings it back).
      clock.now += 10_000;
      vi.advanceTimersByTime(30_000);
      expect(vi.getTimerCount()).toBe(0);
      expect((await httpRequest(url, { path: "/" })).status).toBe(200);
    } finally {
      gate.open();
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("concurrency, the keep-alive of a very long lease", () => {
  it("never asks for an interval past what timers hold (2^31 - 1 ms): node would run it every millisecond", async () => {
    const gate = new Gate();
    const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: "100d", store: new MemoryStore({ sweepIntervalMs: 0 }) });
    const server = await (FRAMEWORKS.node as (typeof FRAMEWORKS)[string])({ concurrency: pool }, gate);
    const url = await listen(server);
    const spy = vi.spyOn(globalThis, "setInterval");
    try {
      const long = httpRequest(url, { path: "/hold" });
      long.catch(() => undefined);
      await until(() => gate.holding === 1, "the request in flight", 400, 5);
      const delays = spy.mock.calls.map((c) => c[1] ?? 0);
      expect(delays.length).toBeGreaterThan(0);
      for (const d of delays) expect(d).toBeLessThanOrEqual(2_147_483_647);
      gate.open();
      expect((await long).status).toBe(200);
    } finally {
      spy.mockRestore();
      gate.open();
      server.closeAllConnections();
      server.close();
    }
  });
});

describeRedis("concurrency on Redis, a request longer than its lease across an outage", () => {
  let redis: RedisHandle;
  let io: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    io = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    io?.disconnect();
    await redis?.stop();
  });

  it('"closed": a renew refused while Redis is down does not stop the renewing: the lease is kept once Redis answers', async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const gate = new Gate();
    const ctl = { down: false };
    const clock = { now: 1_763_740_800_000 };
    const store = new RedisStore({ client: outageClient(io, ctl).client, failure: "closed", timeoutMs: 5_000, instances: 1 });
    const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 30_000, store, clock: () => clock.now, namespace: `long${process.pid}` });
    const errors: unknown[] = [];
    const server = await (FRAMEWORKS.node as (typeof FRAMEWORKS)[string])(
      { concurrency: pool, onError: (e: unknown) => errors.push(e) },
      gate,
    );
    const url = await listen(server);
    try {
      const long = httpRequest(url, { path: "/hold" });
      long.catch(() => undefined);
      await until(() => gate.holding === 1, "the request in flight", 400, 5);
      const step = async (down: boolean) => {
        ctl.down = down;
        clock.now += 10_000;
        vi.advanceTimersByTime(10_000); // the keep-alive's renew is sent now, at clock.now
        await new Promise((r) => setImmediate(r));
      };
      await step(true); // the renew fails: "closed" says false
      await step(false);
      await step(false);
      await step(false); // 40 s after the acquire, 30 s after the last renew that Redis saw before
      expect(errors.length).toBeGreaterThan(0); // the refused renew was reported
      expect((await httpRequest(url, { path: "/" })).status).toBe(429);
      gate.open();
      expect((await long).status).toBe(200);
    } finally {
      ctl.down = false;
      gate.open();
      server.closeAllConnections();
      server.close();
    }
  });
});
