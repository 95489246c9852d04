/**
 * What a leased decision's `resetAfterMs` says (docs/leasing.md, "resetAfterMs"): with a bucket,
 * every unit of a block is charged in Redis when the block is taken, so the decision reports the
 * time until the bucket drains with the block counted as spent, what a per-decision limiter of
 * the same policy reads from Redis then; longer than without leasing by the drain time of the
 * block's unspent units. A fixed window's is its window's end, as without leasing. The clock is
 * injected, so the numbers are exact.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { RateLimiter, type LimitSpec } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";

describeRedis("quota leasing: resetAfterMs", () => {
  let redis: RedisHandle;
  let client: Redis;
  let store: RedisStore;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
    store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000, minTtlMs: 600_000, instances: 1 });
  });
  afterAll(async () => {
    await store?.close();
    client?.disconnect();
    await redis?.stop();
  });

  const T = 1_800_000_000_000;
  const clock = () => T;
  /** 20 requests at once through a leased limiter (the first take asks for the 20 waiting), then one more. */
  async function leasedThenPlain(spec: LimitSpec, namespace: string) {
    const leased = new RateLimiter({ ...spec, store, clock, namespace, lease: { blockMs: "1s" } });
    const plain = new RateLimiter({ ...spec, store, clock, namespace });
    await Promise.all(Array.from({ length: 20 }, () => leased.consume("k")));
    const d = await leased.consume("k");
    const alone = new RateLimiter({ ...spec, store, clock, namespace: `${namespace}-alone` });
    for (let i = 0; i < 20; i++) await alone.consume("k");
    return { leased: d, redis: await plain.peek("k"), unleased: await alone.consume("k") };
  }

  it("a token bucket: the whole block counts, as Redis reads it; longer than without leasing", async () => {
    // 100 per 10 s: 100 ms a unit; capacity 100, so a block of at most 50 (half of it, one lessee).
    const r = await leasedThenPlain({ algorithm: "token-bucket", limit: 100, window: "10s" }, `tb${process.pid}`);
    expect(r.unleased.resetAfterMs).toBe(2100); // 21 units spent
    // Redis's level, blocks included (a peek adds the unit of the request it would admit).
    expect(r.leased.resetAfterMs).toBe(r.redis.resetAfterMs - 100);
    expect(r.leased.resetAfterMs).toBeGreaterThan(r.unleased.resetAfterMs);
    expect(r.leased.resetAfterMs % 100).toBe(0);
    expect(r.leased.resetAfterMs).toBeLessThanOrEqual(2100 + 50 * 100);
    expect(r.leased.remaining).toBe(r.unleased.remaining);
  });

  it("a fixed window: its window's end, as without leasing", async () => {
    const r = await leasedThenPlain({ algorithm: "fixed-window", limit: 100, window: "10s" }, `fw${process.pid}`);
    expect(r.leased.resetAfterMs).toBe(r.unleased.resetAfterMs);
    expect(r.leased.resetAfterMs).toBe(10_000 - (T % 10_000));
  });
});
