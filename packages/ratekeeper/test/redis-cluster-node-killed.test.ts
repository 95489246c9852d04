/**
 * One master of a Redis Cluster (no replicas) killed with kill -9: its connections are refused.
 * Decisions on keys it served (several limits each) get the caller's failure policy, without a
 * crash or an unhandled rejection; keys on the other masters stay exact, decided by Redis.
 * (cluster-node-timeout is long here: the others keep serving their slots meanwhile.)
 */
import { Cluster, Redis } from "ioredis";
import { createCluster } from "redis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis } from "../../../test-support/redis.js";
import { startRedisCluster, type RedisClusterHandle } from "../../../test-support/redis-cluster.js";
import { RateLimiter, type Decision } from "../src/index.js";
import { RedisStore, type RedisClientLike } from "../src/stores/redis/index.js";

describeRedis("RedisStore on a cluster: one master killed", () => {
  let cluster: RedisClusterHandle;
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 120_000 });
    process.on("unhandledRejection", onUnhandled);
  }, 60_000);
  afterAll(async () => {
    process.off("unhandledRejection", onUnhandled);
    await cluster?.stop();
  });

  it("ioredis and node-redis: the dead master's keys get the failure policy, the others stay exact", async () => {
    const ioredis = new Cluster(cluster.nodes);
    const nodeRedis = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
    await nodeRedis.connect();
    const clients: [string, RedisClientLike][] = [
      ["ioredis", ioredis],
      ["node-redis", nodeRedis],
    ];
    const limiters = clients.map(
      ([lib, client]) =>
        [
          lib,
          new RateLimiter({
            limits: [
              { algorithm: "fixed-window", limit: 5, window: "1h" },
              { algorithm: "sliding-window", limit: 6, window: "1h" },
            ],
            store: new RedisStore({ client, failure: "open", timeoutMs: 3000 }),
          }),
        ] as const,
    );
    const keys = (lib: string) => Array.from({ length: 12 }, (_, i) => `${lib}:k${i}`);
    for (const [lib, limiter] of limiters) for (const k of keys(lib)) expect((await limiter.consume(k)).allowed).toBe(true);
    const holder = new Map<string, number>();
    for (const n of cluster.nodes) {
      const r = new Redis(n.port, n.host);
      for (const k of await r.keys("*:k*")) {
        const m = /(ioredis|node-redis):k\d+/.exec(k);
        if (m) holder.set(m[0], n.port);
      }
      r.disconnect();
    }
    const dead = holder.get("ioredis:k0") as number;
    await cluster.kill9(dead);
    for (const [lib, limiter] of limiters) {
      const results = await Promise.all(
        keys(lib).flatMap((k) => Array.from({ length: 8 }, () => limiter.consume(k).then((d): [string, Decision] => [k, d]))),
      );
      for (const k of keys(lib)) {
        const mine = results.filter(([key]) => key === k).map(([, d]) => d);
        if (holder.get(k) === dead)
          expect(
            mine.every((d) => d.allowed && d.reason !== undefined),
            `${k} on the dead master`,
          ).toBe(true);
        else
          expect(
            mine.filter((d) => d.allowed && d.reason === undefined),
            `${k} on a live master`,
          ).toHaveLength(4);
      }
    }
    ioredis.disconnect();
    // close() waits for the dead node's connection to come back: destroy() does not.
    nodeRedis.destroy();
    await new Promise((r) => setTimeout(r, 300));
    expect(unhandled).toEqual([]);
  }, 180_000);
});
