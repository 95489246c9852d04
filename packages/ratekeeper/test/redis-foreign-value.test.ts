/**
 * A key of the store holding a value the store did not write (another program's list or hash
 * under our key name, a string in no layout of ours): Redis answers every decision on it with an
 * error (WRONGTYPE, or the script's own error on the value), yet Redis is up. That one key's
 * decisions get the failure policy (and `onError`), every other key stays decided by Redis,
 * exactly: the breaker must not open. (It opened after three such errors in a row, and then the
 * failure policy answered for every key of the store, flapping as probes succeeded and the key
 * failed again.) A Redis that cannot serve (OOM, READONLY, BUSY, LOADING...) still opens it:
 * redis-maxmemory.test.ts, redis-outage.test.ts. Decisions here are made one at a time; in a
 * batch (several decisions in one script call): redis-foreign-batch.test.ts.
 */
import { Redis } from "ioredis";
import { createClient } from "redis";
import { expect, it } from "vitest";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { MemoryStore, RateLimiter, type AlgorithmName } from "../src/index.js";
import { RedisStore, type BreakerEvent, type RedisClientLike } from "../src/stores/redis/index.js";

const ALGORITHMS: AlgorithmName[] = ["fixed-window", "sliding-window", "sliding-log", "token-bucket", "leaky-bucket", "gcra"];
/** How each foreign value is put under a key name of ours. */
const FOREIGN: Record<string, (c: Redis, key: string) => Promise<unknown>> = {
  "a list": (c, key) => c.rpush(key, "x"),
  "a hash": (c, key) => c.hset(key, "f", "v"),
  "a text": (c, key) => c.set(key, "hello world, not ours"),
  "an empty string": (c, key) => c.set(key, ""),
  "two bytes": (c, key) => c.set(key, "12"),
};

describeRedis("a foreign value under one key of the store", () => {
  const fx = redisStoreFixture();

  for (const clientKind of ["ioredis", "node-redis"] as const) {
    it(`${clientKind}: that key gets the failure policy; the others stay exact, the breaker closed`, async () => {
      let n = 0;
      const node = clientKind === "node-redis" ? createClient({ socket: { host: fx.redis.host, port: fx.redis.port } }) : undefined;
      await node?.connect();
      const ioredis = clientKind === "ioredis" ? new Redis(fx.redis.port, fx.redis.host) : undefined;
      try {
        for (const algorithm of ALGORITHMS) {
          for (const [what, put] of Object.entries(FOREIGN)) {
            const errors: string[] = [];
            const breaker: BreakerEvent[] = [];
            const store = new RedisStore({
              client: (node ?? ioredis) as RedisClientLike,
              onError: (e) => errors.push(e.message),
              onStateChange: (e) => breaker.push(e),
            });
            const namespace = `${clientKind}-${algorithm}-${++n}`;
            const lim = new RateLimiter({ algorithm, limit: 3, window: "1h", store, namespace });
            await lim.consume("probe");
            const [probeKey] = await fx.admin.keys(`*{${namespace}:probe}*`);
            const bad = (probeKey as string).replace(":probe}", ":bad}");
            await put(fx.admin, bad);
            const label = `${algorithm}, ${what}`;
            // The foreign key: answered by the failure policy ("degraded": locally, at this
            // instance's share) or, where the value happens to read as a state, by Redis; never a throw.
            for (let i = 0; i < 8; i++) await lim.consume("bad");
            // Every other key: Redis decides, exactly as a memory store does.
            const reference = new RateLimiter({ algorithm, limit: 3, window: "1h", store: new MemoryStore() });
            const other = [];
            const expected = [];
            for (let i = 0; i < 5; i++) {
              other.push((await lim.consume("other")).allowed);
              expected.push((await reference.consume("other")).allowed);
            }
            expect(other, label).toEqual(expected);
            expect(
              breaker.map((e) => e.to),
              `${label}: ${errors[0] ?? ""}`,
            ).toEqual([]);
          }
        }
      } finally {
        ioredis?.disconnect();
        await node?.quit();
      }
    }, 120_000);
  }
});
