/**
 * A limiter with an injected clock on a Redis store whose Redis is unreachable: the failure
 * policy's local stores (the insurance store, the degraded limiter's memory store, their lease
 * tables) decide on the injected clock's times, so a memory store's sweep timer, which reads the
 * process clock, must pass their keys and leases by. With a clock a day behind, a key still
 * limited on it looked expired to the timer and was dropped: the client got a fresh allowance in
 * the middle of an outage. No redis-server needed: the client points at a closed port.
 */
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ConcurrencyLimiter, MemoryStore, RateLimiter } from "../src/index.js";
import { HttpRedisStore } from "../src/stores/redis-http/index.js";
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
      const local = policy === "insurance" ? insurance : (store.localStore() as MemoryStore);
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
