/**
 * `console.log(lease)` (or a limiter, or a store) shows what it is in a line or two: not the
 * limiter, store, tables and timers behind it. And `JSON.stringify(lease)` (a lease handed to a
 * client as JSON) gives its fields; it threw ("Converting circular structure to JSON": a timer).
 */
import { inspect } from "node:util";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { ConcurrencyLimiter, MemoryStore, RateLimiter } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";

const store = new MemoryStore();
afterAll(() => store.close());

/** Nothing of the machinery behind: tables, timers, the store inside a lease. */
function compact(text: string): void {
  expect(text.length, text).toBeLessThan(400);
  expect(text).not.toMatch(/Timeout|_idle|tables|byPolicy|leasePools|\[Map|pool:/);
}

describe("compact util.inspect and toJSON", () => {
  it("a lease: its fields only, in inspect and in JSON", async () => {
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 5, window: "1m", store });
    for (let i = 0; i < 50; i++) await limiter.consume(`k${i}`);
    const pool = new ConcurrencyLimiter({ limit: 2, store, namespace: "jobs" });
    const lease = await pool.acquire("tenant:7");
    const text = inspect(lease);
    compact(text);
    expect(text).toMatch(/^Lease \{/);
    expect(text).toContain("tenant:7");
    expect(text).toContain(lease.id);
    expect(JSON.parse(JSON.stringify(lease))).toEqual({
      acquired: true,
      key: "tenant:7",
      id: lease.id,
      limit: 2,
      remaining: 1,
      retryAfterMs: 0,
    });
    await lease.release();
  });

  it("a limiter, a concurrency limiter and the memory store: a summary, in inspect and in JSON", () => {
    const limiter = new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", store, namespace: "api" });
    const pool = new ConcurrencyLimiter({ limit: 3, leaseMs: 5000, store, namespace: "jobs" });
    for (const [x, name] of [
      [limiter, "RateLimiter"],
      [pool, "ConcurrencyLimiter"],
      [store, "MemoryStore"],
    ] as const) {
      const text = inspect(x);
      compact(text);
      expect(text.startsWith(`${name} {`), text).toBe(true);
      expect(() => JSON.stringify(x)).not.toThrow();
    }
    expect(inspect(limiter)).toContain("api");
    expect(JSON.parse(JSON.stringify(pool))).toEqual({
      limit: 3,
      leaseMs: 5000,
      namespace: "jobs",
      store: JSON.parse(JSON.stringify(store)),
    });
    expect(JSON.parse(JSON.stringify(store))).toMatchObject({ maxKeys: store.maxKeys, maxBytes: store.maxBytes });
  });

  it("a Redis store: not its client", async () => {
    const client = new Redis(1, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    client.on("error", () => undefined);
    const redis = new RedisStore({ client, instances: 1 });
    try {
      const text = inspect(redis);
      compact(text);
      expect(text).toMatch(/^RedisStore \{/);
      expect(text).not.toMatch(/Redis \{|connector|commandQueue/);
      expect(() => JSON.stringify(redis)).not.toThrow();
    } finally {
      await redis.close();
      client.disconnect();
    }
  });
});
