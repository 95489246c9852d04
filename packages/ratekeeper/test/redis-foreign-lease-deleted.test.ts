/**
 * A concurrency limit whose Redis key (`:c`) held a foreign value: the failure policy
 * ("degraded", "insurance") granted leases from a local table (redis-foreign-lease.test.ts), and
 * they stay there (their renews and releases go there) rather than be handed to Redis on a timer,
 * which refused them every 100 ms for ever. Once the operator deletes the foreign value, Redis
 * counts from the next acquire on: it must know those leases first, or it grants the whole limit
 * again beside them (with renews, for as long as their holders keep them). Before, it never
 * learned of them: a limit of 2 held 4 leases.
 */
import { Redis } from "ioredis";
import { expect, it } from "vitest";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { ConcurrencyLimiter, MemoryStore } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeRedis("a concurrency key's foreign value deleted while leases the policy granted locally are held", () => {
  const fx = redisStoreFixture();

  let n = 0;
  for (const failure of ["degraded", "insurance"] as const) {
    it(`${failure}: Redis learns of them before it counts again; the limit holds; reported once`, async () => {
      const client = new Redis(fx.redis.port, fx.redis.host);
      try {
        const errors: Error[] = [];
        const store = new RedisStore({
          client,
          failure: failure === "insurance" ? { insurance: new MemoryStore() } : failure,
          onError: (e) => errors.push(e),
        });
        const namespace = `fd-${failure}-${++n}`;
        const pool = new ConcurrencyLimiter({ limit: 2, leaseMs: 60_000, store, namespace });
        const key = `rk:{${namespace}:k}:c`;
        await fx.admin.set(key, "not ours");
        const held = [await pool.acquire("k"), await pool.acquire("k")];
        expect(held.map((l) => [l.acquired, l.reason])).toEqual([
          [true, failure === "insurance" ? "insurance" : "degraded"],
          [true, failure === "insurance" ? "insurance" : "degraded"],
        ]);
        expect((await pool.acquire("k")).acquired).toBe(false); // the local table is full
        const reported = errors.length;
        await sleep(300);
        expect(errors).toHaveLength(reported); // nothing on a timer

        await fx.admin.del(key);
        const after = [];
        for (let i = 0; i < 3; i++) after.push((await pool.acquire("k")).acquired);
        expect(after, "acquires once the foreign value is gone, 2 leases held").toEqual([false, false, false]);
        expect(await fx.admin.zcard(key)).toBe(2);
        for (const l of held) expect(await l.renew()).toBe(true);
        await held[0]?.release();
        expect((await pool.acquire("k")).acquired).toBe(true);
        expect((await pool.acquire("k")).acquired).toBe(false);
        expect(errors).toHaveLength(reported);
      } finally {
        client.disconnect();
      }
    });
  }

  it("another instance acquiring once the value is gone: the holders' renews hand their leases over", async () => {
    // Two instances on one Redis; the acquires after the deletion reach the other one (a load
    // balancer), while the first one's holders only renew. Before, the first one's leases stayed
    // local for as long as they were renewed, and Redis granted the whole limit again beside them.
    const clients = [new Redis(fx.redis.port, fx.redis.host), new Redis(fx.redis.port, fx.redis.host)];
    try {
      const namespace = `fd-peer-${++n}`;
      const [a, b] = clients.map((client) => {
        const store = new RedisStore({ client, failure: { insurance: new MemoryStore() }, onError: () => undefined });
        return new ConcurrencyLimiter({ limit: 2, leaseMs: 60_000, store, namespace });
      }) as [ConcurrencyLimiter, ConcurrencyLimiter];
      const key = `rk:{${namespace}:k}:c`;
      await fx.admin.set(key, "not ours");
      const held = [await a.acquire("k"), await a.acquire("k")];
      expect(held.map((l) => [l.acquired, l.reason])).toEqual([
        [true, "insurance"],
        [true, "insurance"],
      ]);
      await fx.admin.del(key);
      for (const l of held) expect(await l.renew()).toBe(true);
      expect(await fx.admin.zcard(key), "Redis holds the renewed leases").toBe(2);
      const other = [];
      for (let i = 0; i < 2; i++) other.push((await b.acquire("k")).acquired);
      expect(other, "the other instance's acquires, 2 leases held").toEqual([false, false]);
      for (const l of held) expect(await l.renew()).toBe(true);
      await held[0]?.release();
      expect((await b.acquire("k")).acquired).toBe(true);
    } finally {
      for (const c of clients) c.disconnect();
    }
  });

  it("while the value is still there, an acquire costs Redis a few script calls, not one per lease held", async () => {
    // Each acquire tried every lease granted locally again, one script call each, though Redis
    // refuses them all while the value is there: a pool of 1000 cost 1000 calls an acquire.
    const client = new Redis(fx.redis.port, fx.redis.host);
    try {
      const store = new RedisStore({ client, failure: { insurance: new MemoryStore() }, onError: () => undefined });
      const namespace = `fd-calls-${++n}`;
      const pool = new ConcurrencyLimiter({ limit: 20, leaseMs: 60_000, store, namespace });
      await fx.admin.set(`rk:{${namespace}:k}:c`, "not ours");
      for (let i = 0; i < 20; i++) expect((await pool.acquire("k")).acquired).toBe(true);
      const calls = async () => {
        const info = await fx.admin.info("commandstats");
        return [...info.matchAll(/cmdstat_(?:eval|evalsha):calls=(\d+)/g)].reduce((t, m) => t + Number(m[1]), 0);
      };
      const before = await calls();
      for (let i = 0; i < 10; i++) expect((await pool.acquire("k")).acquired).toBe(false);
      const per = ((await calls()) - before) / 10;
      expect(per, "script calls per acquire, 20 leases held").toBeLessThanOrEqual(3);
    } finally {
      client.disconnect();
    }
  });

  it("while the value is still there, an acquire tries them again without reporting each try", async () => {
    const client = new Redis(fx.redis.port, fx.redis.host);
    try {
      const errors: Error[] = [];
      const store = new RedisStore({ client, failure: "degraded", onError: (e) => errors.push(e) });
      const namespace = `fd-still-${++n}`;
      const pool = new ConcurrencyLimiter({ limit: 3, leaseMs: 60_000, store, namespace });
      const key = `rk:{${namespace}:k}:c`;
      await fx.admin.rpush(key, "x");
      const a = await pool.acquire("k");
      expect([a.acquired, a.reason]).toEqual([true, "degraded"]);
      const once = errors.length;
      for (let i = 0; i < 4; i++) await pool.acquire("k");
      // Each acquire refused by Redis is reported (as before); the hand-overs tried before them are not.
      expect(errors.length - once).toBe(4);
      expect(await fx.admin.lrange(key, 0, -1)).toEqual(["x"]);
    } finally {
      client.disconnect();
    }
  });
});
