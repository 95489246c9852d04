/**
 * Quota leasing at its edges (stores/leased-table.ts over scripts/lease.lua):
 * - a refund puts back into the live block only what that block spent; the rest is Redis's to
 *   refund, so refunds never let through more than the same refunds would without leasing;
 * - RedisStore.close() gives back the units of blocks that were still on their way when it was called.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { RateLimiter } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";

let seq = 0;
const uniq = (tag: string) => `${tag}${process.pid}-${++seq}`;

describeRedis("quota leasing at its edges, on Redis", () => {
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

  // Refunds of units admitted before (in an earlier window, or from a block given back) added
  // themselves to the live block without bound: a stream of refunds was an unlimited allowance.
  it.each([
    { algorithm: "fixed-window", limit: 10, window: "1h" },
    { algorithm: "token-bucket", limit: 10, window: "1h" },
    { algorithm: "gcra", limit: 10, window: "1h", burst: 9 },
  ] as const)("refunds beyond what the block spent do not grow it ($algorithm)", async (policy) => {
    const store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000 });
    const spec = { ...policy, namespace: uniq("refund"), store };
    const results: number[] = [];
    for (const lease of [true, false]) {
      const limiter = new RateLimiter({ ...spec, namespace: `${spec.namespace}-${lease}`, lease });
      expect((await limiter.consume("k")).allowed).toBe(true);
      for (let i = 0; i < 5; i++) await limiter.refund("k", 10);
      let admitted = 0;
      for (let i = 0; i < 30; i++) if ((await limiter.consume("k")).allowed) admitted++;
      results.push(admitted);
    }
    expect(results, "admitted after the refunds: leased, then the same without leasing").toEqual([10, 10]);
    await store.close();
  });

  it("a refund of what the block spent goes back into it, with no store call", async () => {
    const store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000 });
    const spec = { algorithm: "fixed-window", limit: 100, window: "1h", namespace: uniq("refund-own"), store } as const;
    const leased = new RateLimiter({ ...spec, lease: true });
    const plain = new RateLimiter(spec);
    await leased.consume("k");
    await Promise.all(Array.from({ length: 10 }, () => leased.consume("k"))); // a bigger block
    const before = (await plain.peek("k")).remaining;
    for (let i = 0; i < 11; i++) await leased.refund("k");
    expect((await plain.peek("k")).remaining, "Redis untouched: the refunds went into the block").toBe(before);
    await store.close();
    // A peek's remaining is what is left after a cost-1 request: 99 of a full allowance.
    expect((await plain.peek("k")).remaining, "all 11 given back with the block").toBe(99);
  });

  // close() gave back the blocks held when it was called; a take still on its way landed after,
  // and its units stayed taken (until the window ended) in a process about to exit.
  it("RedisStore.close() gives back the units of a take that was on its way", async () => {
    const store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000 });
    const spec = { algorithm: "fixed-window", limit: 100, window: "1h", namespace: uniq("close"), store } as const;
    const leased = new RateLimiter({ ...spec, lease: true });
    const plain = new RateLimiter(spec);
    const decisions = Promise.all(Array.from({ length: 5 }, () => leased.consume("k")));
    await store.close();
    // A peek's remaining is what is left after a cost-1 request.
    expect((await plain.peek("k")).remaining, "only the 5 decisions' units still taken").toBe(94);
    expect((await decisions).every((d) => d.allowed)).toBe(true);
  });
});
