/**
 * Batching on a Redis Cluster: one batcher per hash slot, since a script call may touch one slot
 * only. Concurrent decisions on one hot key go out together (few script calls, exactly the limit);
 * decisions on keys of different slots each go out at once, to their own masters.
 */
import { Redis } from "ioredis";
import { expect, it } from "vitest";
import { commandCalls } from "../../../test-support/redis-commands.js";
import { describeRedis } from "../../../test-support/redis.js";
import type { RedisClusterHandle } from "../../../test-support/redis-cluster.js";
import { RateLimiter } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { redisClusterFixture } from "./redis-store-support.js";

/** EVALSHA calls summed over the masters. */
async function evalshaCalls(cluster: RedisClusterHandle): Promise<number> {
  let n = 0;
  for (const node of cluster.nodes) {
    const c = new Redis(node.port, node.host);
    n += (await commandCalls(c)).evalsha ?? 0;
    c.disconnect();
  }
  return n;
}

describeRedis("RedisStore on a cluster: batching per hash slot (the default)", () => {
  const fx = redisClusterFixture();

  it("200 concurrent consumes on one hot key: exactly the limit, in a few script calls", async () => {
    const limiter = new RateLimiter({
      algorithm: "token-bucket",
      limit: 25,
      window: "1h",
      store: new RedisStore({ client: fx.client, failure: "throw" }),
    });
    await limiter.consume("warm"); // connects, registers the instance, reads Redis's clock
    const before = await evalshaCalls(fx.cluster);
    const all = await Promise.all(Array.from({ length: 200 }, () => limiter.consume("hot")));
    const calls = (await evalshaCalls(fx.cluster)) - before;
    expect(all.filter((d) => d.allowed)).toHaveLength(25);
    expect(all.slice(0, 25).every((d) => d.allowed)).toBe(true); // in call order
    expect(calls).toBeLessThanOrEqual(10);
  });

  it("keys on every master, several limits per key: exactly the limit per key", async () => {
    const limiter = new RateLimiter({
      limits: [
        { algorithm: "fixed-window", limit: 7, window: "1h" },
        { algorithm: "sliding-window", limit: 9, window: "1h" },
      ],
      store: new RedisStore({ client: fx.client, failure: "throw" }),
    });
    const keys = Array.from({ length: 12 }, (_, i) => `user:${i}`);
    const all = await Promise.all(
      keys.flatMap((k) => Array.from({ length: 20 }, () => limiter.consume(k).then((d) => [k, d.allowed] as const))),
    );
    for (const k of keys)
      expect(
        all.filter(([key, ok]) => key === k && ok),
        k,
      ).toHaveLength(7);
  });
});
