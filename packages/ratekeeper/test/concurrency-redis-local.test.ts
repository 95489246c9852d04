/**
 * ConcurrencyLimiter on Redis: the leases the failure policy grants locally while Redis does not
 * answer ("degraded", insurance), and what becomes of them. Their renew and release stay with the
 * local table that holds them, by key and id; once Redis answers again they are handed to Redis,
 * so that Redis counts them and grants no slot they hold. Outages are cued (a client whose calls
 * fail while `ctl.down` is set); the real server keeps running.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { ConcurrencyLimiter, MemoryStore } from "../src/index.js";
import { RedisStore, type RedisFailurePolicy } from "../src/stores/redis/index.js";
import { outageClient } from "./redis-store-support.js";

let seq = 0;

describeRedis("ConcurrencyLimiter: leases granted locally while Redis was down", () => {
  let redis: RedisHandle;
  let io: Redis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    io = new Redis(redis.port, redis.host);
    admin = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    io?.disconnect();
    admin?.disconnect();
    await redis?.stop();
  });

  function pool(limit: number, failure: RedisFailurePolicy = "degraded") {
    const ctl = { down: false };
    const { client } = outageClient(io, ctl);
    const store = new RedisStore({ client, failure, timeoutMs: 5_000, instances: 1 });
    const namespace = `loc${process.pid}-${++seq}`;
    const p = new ConcurrencyLimiter({ limit, leaseMs: 3_600_000, store, namespace });
    return { p, ctl, store, zkey: (key: string) => `${store.prefix}{${namespace}:${key}}:c` };
  }

  describe.each(["degraded", "insurance"] as const)("%s", (policy) => {
    const failure = (): RedisFailurePolicy => (policy === "degraded" ? "degraded" : { insurance: new MemoryStore({ sweepIntervalMs: 0 }) });

    it("a release naming another key does not unhook the lease: its own release still frees the local slot", async () => {
      const { p, ctl } = pool(1, failure());
      await p.peek("warm"); // loads the script
      ctl.down = true;
      const a = await p.acquire("a");
      expect(a).toMatchObject({ acquired: true, reason: policy });
      expect(await p.release("b", a.id)).toBe(false); // the id is per key: nothing held on "b"
      expect(await p.release("a", a.id)).toBe(true);
      expect(await p.acquire("a")).toMatchObject({ acquired: true, reason: policy });
    });
  });
});
