/**
 * The behaviour table's cases about what happens around a decision: shaping delays and
 * disconnects, countOnly refunds, and store failures.
 */
import { expect } from "vitest";
import { RateLimitStoreError, type RateLimiter, type Store } from "ratekeeper";
import { eventually, fixed, problem, withLimiter, type Case, type Target } from "./http-support.js";

export const FLOW_CASES: Case[] = [
  {
    name: "shaping (leaky-bucket shape): admitted requests are held for delayMs; beyond maxDelayMs, 429 and the place is given back",
    options: (ctx) =>
      withLimiter(ctx, [{ algorithm: "leaky-bucket", mode: "shape", limit: 20, window: "1s", capacity: 4, name: "queue" }], {
        maxDelayMs: 60,
      }),
    async run(t, ctx) {
      // 20 per second: one unit drains every 50 ms. The clock stands still; only the holds are real time.
      const t1 = performance.now();
      expect((await t.request()).status).toBe(200);
      const t2 = performance.now();
      expect((await t.request()).status).toBe(200);
      const t3 = performance.now();
      expect(t3 - t2).toBeGreaterThanOrEqual(45); // held ~50 ms (timers may fire up to ~1 ms early)
      const over = await t.request();
      expect(over.status).toBe(429);
      expect(over.headers["retry-after"]).toBe("1"); // 100 ms wait - 60 ms max = 40 ms, rounded up to 1 s
      const again = await t.request();
      expect(again.status).toBe(429);
      // The refused request gave its place back: the next one sees the same 100 ms queue (40 ms over), not 150.
      expect(ctx.events.map((e) => [e.limited, e.decision.delayMs, e.decision.retryAfterMs])).toEqual([
        [false, 0, 0],
        [false, 50, 0],
        [true, 0, 40],
        [true, 0, 40],
      ]);
      expect(t2 - t1).toBeGreaterThanOrEqual(0);
    },
  },
  {
    name: "shaping: a client that disconnects while held gives its place back",
    needsSocket: true,
    // 10 per second: the held request would wait 100 ms, a wide margin for the client to leave first on a busy machine.
    options: (ctx) =>
      withLimiter(ctx, [{ algorithm: "leaky-bucket", mode: "shape", limit: 10, window: "1s", capacity: 10, name: "queue" }], {
        maxDelayMs: 5_000,
      }),
    async run(t, ctx) {
      const limiter = ctx.limiter as RateLimiter;
      expect((await t.request()).status).toBe(200); // level 1 unit
      // This one would wait 100 ms; it leaves as soon as the middleware has decided (and holds it).
      await (t.abandon as NonNullable<Target["abandon"]>)({}, () => ctx.events.length >= 2);
      await eventually(async () => (await limiter.peek("127.0.0.1")).delayMs === 100);
      const r = await t.request();
      expect(r.status).toBe(200);
      expect(ctx.events.map((e) => e.decision.delayMs)).toEqual([0, 100, 100]);
    },
  },
  {
    name: "countOnly failed: successful responses are refunded, failures count",
    options: (ctx) => withLimiter(ctx, [fixed(2, "1m")], { countOnly: "failed" }),
    async run(t, ctx) {
      const limiter = ctx.limiter as RateLimiter;
      for (let i = 0; i < 4; i++) {
        expect((await t.request({ path: "/status/200" })).status).toBe(200);
        // peek reports what would remain after one more request: 1 of 2 when nothing is charged.
        await eventually(async () => (await limiter.peek("127.0.0.1")).remaining === 1);
      }
      expect((await t.request({ path: "/status/500" })).status).toBe(500);
      expect((await t.request({ path: "/status/404" })).status).toBe(404);
      expect((await t.request({ path: "/status/200" })).status).toBe(429);
    },
  },
  {
    name: "countOnly successful: failed responses are refunded",
    options: (ctx) => withLimiter(ctx, [fixed(1, "1m")], { countOnly: "successful" }),
    async run(t, ctx) {
      const limiter = ctx.limiter as RateLimiter;
      for (let i = 0; i < 3; i++) {
        expect((await t.request({ path: "/status/503" })).status).toBe(503);
        await eventually(async () => (await limiter.peek("127.0.0.1")).allowed);
      }
      expect((await t.request()).status).toBe(200);
      expect((await t.request()).status).toBe(429);
    },
  },
  {
    name: "store failure: the request goes through and onError hears of it (default)",
    memoryOnly: true,
    options: (ctx) => ({ limits: [fixed(1, "1m")], store: failingStore(), onError: (e: unknown) => ctx.errors.push(e) }),
    async run(t, ctx) {
      const r = await t.request();
      expect(r.status).toBe(200);
      expect(r.headers["ratelimit"]).toBeUndefined();
      expect(ctx.errors).toHaveLength(1);
      expect(ctx.errors[0]).toBeInstanceOf(RateLimitStoreError);
    },
  },
  {
    name: 'a store that rejects, with failure: "closed", answers 503 problem+json',
    memoryOnly: true,
    options: (ctx) => ({
      limits: [fixed(1, "1m")],
      store: failingStore(),
      failure: "closed",
      onError: (e: unknown) => ctx.errors.push(e),
    }),
    async run(t, ctx) {
      const r = await t.request();
      expect(r.status).toBe(503);
      expect(problem(r)).toMatchObject({ status: 503 });
      expect(ctx.errors).toHaveLength(1);
    },
  },
];

/** A real Store whose every call fails, as a Redis store with `failOpen: false` does when Redis is down. */
function failingStore(): Store {
  const fail = () => Promise.reject(new RateLimitStoreError("store down", { cause: new Error("ECONNREFUSED") }));
  return { bind: () => ({ consume: fail, peek: fail, refund: fail, reset: fail }) };
}
