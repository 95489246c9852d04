/**
 * A limiter with an injected clock on a Redis store whose Redis is unreachable: the failure
 * policy's local stores (the insurance store, the degraded limiter's memory store, their lease
 * tables) decide on the injected clock's times, so a memory store's sweep timer, which reads the
 * process clock, must pass their keys and leases by. With a clock a day behind, a key still
 * limited on it looked expired to the timer and was dropped: the client got a fresh allowance in
 * the middle of an outage. No redis-server needed: the client points at a closed port.
 * And what the degraded policy admitted is charged to Redis on the injected clock too (a real
 * redis-server, one call failed on purpose).
 */
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { until } from "../../../test-support/process.js";
import { describeRedis } from "../../../test-support/redis.js";
import { ConcurrencyLimiter, MemoryStore, RateLimiter } from "../src/index.js";
import { HttpRedisStore } from "../src/stores/redis-http/index.js";
import { failNextClient, redisStoreFixture } from "./redis-store-support.js";
import { RedisStore, type RedisFailurePolicy } from "../src/stores/redis/index.js";

const DAY = 86_400_000;
/** The memory store's default sweep interval: the degraded policy's local store uses it. */
const DEFAULT_SWEEP_MS = 60_000;

describe("an injected clock on a Redis store's local fallbacks", () => {
  const clients: Redis[] = [];
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
  });
  afterEach(() => {
    vi.useRealTimers();
    for (const c of clients.splice(0)) c.disconnect();
  });

  /** A RedisStore whose every call fails at once (nothing listens on port 1). */
  function unreachable(failure: RedisFailurePolicy): RedisStore {
    const dead = new Redis(1, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    dead.on("error", () => undefined);
    clients.push(dead);
    return new RedisStore({ client: dead, failure, timeoutMs: 200, instances: 1 });
  }

  const behind = () => Date.now() - DAY; // a day behind the process clock, read at each call

  for (const policy of ["insurance", "degraded"] as const) {
    it(`${policy}: a key limited on the injected clock stays limited after the local sweep timer fires`, async () => {
      const insurance = new MemoryStore({ sweepIntervalMs: 1_000 });
      const store = unreachable(policy === "insurance" ? { insurance } : "degraded");
      const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 1, window: "1h", store, clock: behind });
      expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: policy });
      expect((await limiter.consume("k")).allowed).toBe(false);
      vi.advanceTimersByTime(policy === "insurance" ? 1_000 : DEFAULT_SWEEP_MS); // sweeps at Date.now(): a day on
      expect((await limiter.consume("k")).allowed).toBe(false);
    });

    it(`${policy}: a lease held on the injected clock stays held after the local sweep timer fires`, async () => {
      const insurance = new MemoryStore({ sweepIntervalMs: 1_000 });
      const store = unreachable(policy === "insurance" ? { insurance } : "degraded");
      const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: "1h", store, clock: behind });
      expect(await pool.acquire("k")).toMatchObject({ acquired: true, reason: policy });
      // A key in a rate table starts the memory store's timer (leases alone do not).
      const local = policy === "insurance" ? insurance : store.localStore();
      await new RateLimiter({ algorithm: "gcra", limit: 5, window: "1s", store: local }).consume("x");
      vi.advanceTimersByTime(policy === "insurance" ? 1_000 : DEFAULT_SWEEP_MS);
      expect(await pool.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
    });
  }

  it("HttpRedisStore, insurance: a key limited on the injected clock stays limited after the sweep timer fires", async () => {
    const fail = () => Promise.reject(new Error("connection refused"));
    const insurance = new MemoryStore({ sweepIntervalMs: 1_000 });
    const store = new HttpRedisStore({ client: { eval: fail, evalsha: fail }, failure: { insurance } });
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 1, window: "1h", store, clock: behind });
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: "insurance" });
    vi.advanceTimersByTime(1_000);
    expect((await limiter.consume("k")).allowed).toBe(false);
  });
});

describeRedis("an injected clock: the degraded policy's admissions charged to Redis", () => {
  const fx = redisStoreFixture();

  it("are charged at a time on the limiter's clock, not at Redis's", async () => {
    // One call fails (the breaker stays closed): the degraded policy admits locally, and the
    // ledger is charged to Redis 100 ms later. Charged at Redis's TIME, a day past the key's
    // state on the injected clock, the charge opened a window of its own a day ahead: the unit
    // admitted before the outage was forgotten, and the key's window ended a day later than it does.
    const { client: flaky, failNext } = failNextClient(() => fx.client);
    const store = new RedisStore({ client: flaky, instances: 1, timeoutMs: 1_000 });
    const namespace = `clock-${process.pid}-${Math.random().toString(36).slice(2)}`;
    const spec = { algorithm: "fixed-window", limit: 5, window: "1h", align: "first-request" } as const;
    const limiter = new RateLimiter({ ...spec, store, namespace, clock: () => Date.now() - DAY });
    expect((await limiter.consume("k")).reason).toBeUndefined(); // Redis decides
    failNext();
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: "degraded" });
    // An admitted peek reports what would be left after it: 5 - 2 used - 1.
    let d = await limiter.peek("k");
    const charged = async () => {
      d = await limiter.peek("k");
      return d.reason === undefined && d.remaining === 2;
    };
    await until(charged, "the degraded admission to be charged on the injected clock", 100, 20);
    expect(d.resetAfterMs).toBeLessThanOrEqual(3_600_000); // the window opened by the first consume
    await store.close();
  });
});
