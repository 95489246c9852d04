/**
 * ConcurrencyLimiter on Redis when Redis does not answer: each failure policy answers acquires,
 * renews, releases and counts as documented (stores/redis/leases.ts), with the real server
 * stopped; and an acquire that Redis took after the caller was answered by the policy is given
 * back (Redis paused with CLIENT PAUSE past the store's timeout).
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { until } from "../../../test-support/process.js";
import { ConcurrencyLimiter, MemoryStore, RateLimitStoreError } from "../src/index.js";
import { RedisStore, type RedisFailurePolicy } from "../src/stores/redis/index.js";

let seq = 0;
const uniq = () => `o${process.pid}-${++seq}`;

describeRedis("ConcurrencyLimiter when Redis does not answer", () => {
  let redis: RedisHandle;
  let client: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host, { maxRetriesPerRequest: null });
    client.on("error", () => undefined); // connection errors while the server is stopped are expected
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  function pool(failure: RedisFailurePolicy, limit = 2, instances?: number) {
    const store = new RedisStore({ client, failure, timeoutMs: 200, ...(instances === undefined ? {} : { instances }) });
    return new ConcurrencyLimiter({ limit, leaseMs: 60_000, store, namespace: uniq() });
  }

  it("gives back an acquire that Redis took after the policy had answered", async () => {
    const p = pool("closed", 1);
    await p.peek("warm"); // loads the script
    await client.call("CLIENT", "PAUSE", "600", "WRITE");
    const lease = await p.acquire("k");
    expect(lease).toMatchObject({ acquired: false, reason: "store-error" });
    // Once Redis runs the late acquire, the release sent after it on the same connection frees the slot.
    await until(async () => (await p.peek("k")).remaining === 1, "the late lease to be given back", 100, 50);
    expect((await p.acquire("k")).acquired).toBe(true);
  });

  it("with an injected clock, the give-back of a late acquire leaves the key's other leases alone", async () => {
    // The give-back (a release) runs concurrency.lua, which first drops the key's leases expired
    // at its time. Sent at Redis's TIME, a day past the leases of a pool on a clock a day behind,
    // it dropped every live lease of the key with the late one.
    const store = new RedisStore({ client, failure: "closed", timeoutMs: 200 });
    const clock = () => Date.now() - 86_400_000;
    const p = new ConcurrencyLimiter({ limit: 2, leaseMs: 60_000, store, namespace: uniq(), clock });
    const first = await p.acquire("k");
    expect(first.acquired).toBe(true);
    await client.call("CLIENT", "PAUSE", "600", "WRITE");
    expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "store-error" });
    await until(async () => (await p.peek("k")).remaining > 0, "the late lease to be given back", 100, 50);
    expect((await p.peek("k")).remaining).toBe(1); // the first lease is still held
    expect(await first.renew()).toBe(true);
  });

  describe("with the server stopped", () => {
    const held: Record<string, Awaited<ReturnType<ConcurrencyLimiter["acquire"]>>> = {};
    const pools: Record<string, ConcurrencyLimiter> = {};
    beforeAll(async () => {
      for (const f of ["closed", "open", "throw", "insurance"] as const) {
        pools[f] = pool(f === "insurance" ? { insurance: new MemoryStore() } : f);
        held[f] = await pools[f].acquire("k");
      }
      // The default policy, with 3 instances sharing a limit of 7: this process's share is 2.
      pools.degraded = pool("degraded", 7, 3);
      held.degraded = await pools.degraded.acquire("k");
      await redis.stop();
    });
    afterAll(async () => {
      await redis.restart();
    });

    it('"closed": acquires are refused; a renew says false (stop the work); a release does not throw', async () => {
      const p = pools.closed as ConcurrencyLimiter;
      expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "store-error", retryAfterMs: 1000 });
      expect(await held.closed?.renew()).toBe(false);
      await held.closed?.release();
      expect(await p.peek("k")).toMatchObject({ remaining: 0, reason: "store-error" });
    });

    it('"open": acquires are granted without a lease; their renew says true and their release does nothing', async () => {
      const p = pools.open as ConcurrencyLimiter;
      const leases = await Promise.all([p.acquire("k"), p.acquire("k"), p.acquire("k")]);
      expect(leases.map((l) => [l.acquired, l.reason])).toEqual([
        [true, "store-error"],
        [true, "store-error"],
        [true, "store-error"],
      ]);
      expect(await leases[0]?.renew()).toBe(true);
      await leases[0]?.release();
      expect(await held.open?.renew()).toBe(true); // a Redis lease: the holder goes on
    });

    it('"throw": every call rejects with a RateLimitStoreError', async () => {
      const p = pools.throw as ConcurrencyLimiter;
      await expect(p.acquire("k")).rejects.toBeInstanceOf(RateLimitStoreError);
      await expect(held.throw?.renew()).rejects.toBeInstanceOf(RateLimitStoreError);
      await expect(held.throw?.release()).rejects.toBeInstanceOf(RateLimitStoreError);
      await expect(p.peek("k")).rejects.toBeInstanceOf(RateLimitStoreError);
    });

    it("insurance: the insurance store's leases, at the full limit, released and renewed there", async () => {
      const p = pools.insurance as ConcurrencyLimiter;
      const a = await p.acquire("k");
      const b = await p.acquire("k");
      const c = await p.acquire("k");
      expect([a, b, c].map((l) => [l.acquired, l.reason])).toEqual([
        [true, "insurance"],
        [true, "insurance"],
        [false, "limit"],
      ]);
      expect(await a.renew()).toBe(true);
      await a.release();
      expect(await a.renew()).toBe(false);
      expect(await p.acquire("k")).toMatchObject({ acquired: true, reason: "insurance" });
    });

    it('"degraded" (the default): this process\'s share of the limit, floor(limit / N), held locally', async () => {
      const p = pools.degraded as ConcurrencyLimiter;
      const got = await Promise.all([p.acquire("k"), p.acquire("k"), p.acquire("k")]);
      expect(got.map((l) => [l.acquired, l.reason])).toEqual([
        [true, "degraded"],
        [true, "degraded"],
        [false, "limit"],
      ]);
      expect(await p.peek("k")).toMatchObject({ remaining: 0, reason: "degraded" });
      expect(await got[0]?.renew()).toBe(true);
      await got[0]?.release();
      expect(await p.acquire("k")).toMatchObject({ acquired: true, reason: "degraded" });
      expect(await held.degraded?.renew()).toBe(true); // a Redis lease: the holder goes on
    });
  });
});
