/**
 * RedisStore.close() on a frozen Redis (SIGSTOP: the connection stays open, nothing is answered)
 * with `timeoutMs: 0` (no watchdog): close() waited for the leased blocks' give-back and the
 * instance registry's leave, calls that never get an answer, so a process's shutdown hung for
 * as long as Redis stayed frozen. It now waits for them at most CLOSE_WAIT_MS, then resolves
 * (what was not given back expires with its window in Redis; the registry entry with its TTL).
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { RateLimiter } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { CLOSE_WAIT_MS } from "../src/stores/redis/close-wait.js";

describeRedis("RedisStore.close() on a frozen Redis, no timeout", () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    redis?.resume();
    await redis?.stop();
  });

  it("resolves within its bound instead of hanging", { timeout: 15_000 }, async () => {
    const io = new Redis(redis.port, redis.host, { retryStrategy: () => 50 });
    try {
      const store = new RedisStore({ client: io, timeoutMs: 0, failure: "open" });
      const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 100, window: "1h", store, lease: true });
      expect((await limiter.consume("k")).allowed).toBe(true); // a leased block held, the registry joined
      redis.pause();
      const t0 = Date.now();
      const outcome = await Promise.race([store.close().then(() => "closed"), new Promise((r) => setTimeout(() => r("hung"), 8_000))]);
      expect(outcome).toBe("closed");
      expect(Date.now() - t0).toBeLessThan(CLOSE_WAIT_MS + 500);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(CLOSE_WAIT_MS - 50);
    } finally {
      io.disconnect();
      redis.resume();
    }
  });

  it("still gives back and leaves when Redis answers", { timeout: 15_000 }, async () => {
    const io = new Redis(redis.port, redis.host, { retryStrategy: () => 50 });
    try {
      const store = new RedisStore({ client: io, timeoutMs: 0, failure: "open", prefix: "rk2:" });
      const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 100, window: "1h", store, lease: true });
      expect((await limiter.consume("k")).allowed).toBe(true);
      const t0 = Date.now();
      await store.close();
      expect(Date.now() - t0).toBeLessThan(CLOSE_WAIT_MS);
      expect(await io.zcard("rk2:instances")).toBe(0);
      // All but the one unit used came back: the next unleased decision leaves 98.
      const plain = new RateLimiter({ algorithm: "fixed-window", limit: 100, window: "1h", store });
      expect((await plain.consume("k")).remaining).toBe(98);
    } finally {
      io.disconnect();
    }
  });
});
