/**
 * A lease granted by instance A while only A had lost Redis (its failure policy answered), then
 * released through instance B (a load balancer sends the client elsewhere), whose release reaches
 * Redis while Redis does not hold that id: a no-op before, so when A answered again it handed the
 * lease over ("d") and Redis held its slot for nobody until it expired (leaseMs, 30 s here). The
 * release now leaves a tombstone (concurrency.lua KEYS[2]) and the hand-over does nothing.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { ConcurrencyLimiter } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { outageClient } from "./redis-store-support.js";

describeRedis("a lease released through another instance during a one-sided outage", () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it.each(["open", "degraded"] as const)("frees its slot once A hands it over (%s)", { timeout: 15_000 }, async (failure) => {
    const ioA = new Redis(redis.port, redis.host);
    const ioB = new Redis(redis.port, redis.host);
    try {
      const ctl = { down: false };
      const a = new RedisStore({ client: outageClient(ioA, ctl).client, failure, timeoutMs: 200, instances: 1 });
      const b = new RedisStore({ client: ioB, failure, timeoutMs: 200, instances: 1 });
      const poolA = new ConcurrencyLimiter({ limit: 1, leaseMs: 30_000, store: a, namespace: `t-${failure}` });
      const poolB = new ConcurrencyLimiter({ limit: 1, leaseMs: 30_000, store: b, namespace: `t-${failure}` });
      ctl.down = true;
      const lease = await poolA.acquire("k"); // A alone answers (its policy)
      expect(lease.acquired).toBe(true);
      expect(await poolB.release("k", lease.id)).toBe(false); // Redis does not hold the id
      // The release stands beside the key's leases (same hash tag), for B's leaseMs.
      const tombs = `rk:{t-${failure}:k}:c:r`;
      expect(await ioB.zscore(tombs, lease.id)).not.toBeNull();
      const ttl = await ioB.pttl(tombs);
      expect(ttl).toBeGreaterThan(29_000);
      expect(ttl).toBeLessThanOrEqual(30_000);
      ctl.down = false;
      // A answers again: its next call on the key hands its local lease over first.
      await poolA.peek("k").catch(() => undefined);
      for (let i = 0; i < 20 && a.state !== "closed"; i++) await new Promise((r) => setTimeout(r, 100));
      await poolA.peek("k");
      await new Promise((r) => setTimeout(r, 300));
      const again = await poolB.acquire("k");
      expect(again.acquired).toBe(true); // the slot was released: it is free (before: false for 30 s)
      await again.release();
    } finally {
      ioA.disconnect();
      ioB.disconnect();
    }
  });
  it("an offline renew of a lease Redis let expire, released through B, is not taken again ('e')", { timeout: 15_000 }, async () => {
    const ioA = new Redis(redis.port, redis.host);
    const ioB = new Redis(redis.port, redis.host);
    try {
      const ctl = { down: false };
      const a = new RedisStore({ client: outageClient(ioA, ctl).client, failure: "degraded", timeoutMs: 200, instances: 1 });
      const b = new RedisStore({ client: ioB, failure: "degraded", timeoutMs: 200, instances: 1 });
      const opts = { limit: 1, leaseMs: 2_000, namespace: "t-renew" };
      const poolA = new ConcurrencyLimiter({ ...opts, store: a });
      const poolB = new ConcurrencyLimiter({ ...opts, store: b });
      const lease = await poolA.acquire("k"); // in Redis, until t0 + 2 s
      expect(lease.acquired).toBe(true);
      ctl.down = true;
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await lease.renew()).toBe(true); // A alone: said true, to tell Redis later ("e")
      await new Promise((r) => setTimeout(r, 1_100)); // Redis let it expire
      expect(await poolB.release("k", lease.id)).toBe(false); // not held: a tombstone
      ctl.down = false;
      for (let i = 0; i < 20 && a.state !== "closed"; i++) await new Promise((r) => setTimeout(r, 100));
      await poolA.peek("k"); // hands the offline renew over first
      await new Promise((r) => setTimeout(r, 200));
      expect(await ioB.zscore("rk:{t-renew:k}:c", lease.id)).toBeNull();
      const again = await poolB.acquire("k");
      expect(again.acquired).toBe(true);
      await again.release();
    } finally {
      ioA.disconnect();
      ioB.disconnect();
    }
  });
});
