/**
 * One master of a Redis Cluster (no replicas) SIGSTOPped: silent, connections open. Decisions on
 * keys it serves (several limits each) get the caller's failure policy once `timeoutMs` passed,
 * without a crash or an unhandled rejection; keys on the other masters stay exact, decided by
 * Redis; after SIGCONT the stopped master's keys are decided by Redis again.
 */
import { Cluster, Redis } from "ioredis";
import { createCluster } from "redis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis } from "../../../test-support/redis.js";
import { startRedisCluster, type RedisClusterHandle } from "../../../test-support/redis-cluster.js";
import { RateLimiter, type Decision } from "../src/index.js";
import { RedisStore, type RedisClientLike } from "../src/stores/redis/index.js";

describeRedis("RedisStore on a cluster: one master stopped", () => {
  let cluster: RedisClusterHandle;
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 60_000 });
    process.on("unhandledRejection", onUnhandled);
  }, 60_000);
  afterAll(async () => {
    process.off("unhandledRejection", onUnhandled);
    for (const n of cluster?.nodes ?? []) cluster.resume(n.port);
    await cluster?.stop();
  });

  it.each(["ioredis", "node-redis"])(
    "%s: the stopped master's keys get the failure policy, the others stay exact, and it recovers",
    async (lib) => {
      let close: () => Promise<unknown>;
      let client: RedisClientLike;
      if (lib === "ioredis") {
        const c = new Cluster(cluster.nodes);
        client = c;
        close = async () => c.disconnect();
      } else {
        const c = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
        await c.connect();
        client = c;
        close = () => c.close();
      }
      const limiter = new RateLimiter({
        limits: [
          { algorithm: "fixed-window", limit: 5, window: "1h" },
          { algorithm: "token-bucket", limit: 6, window: "1h" },
        ],
        store: new RedisStore({ client, failure: "closed", timeoutMs: 3000 }),
      });
      const keys = Array.from({ length: 12 }, (_, i) => `${lib}:u${i}`);
      for (const k of keys) expect((await limiter.consume(k)).allowed).toBe(true);
      // Which master holds each key's state.
      const holder = new Map<string, number>();
      for (const n of cluster.nodes) {
        const r = new Redis(n.port, n.host);
        for (const k of await r.keys(`*${lib}:u*`)) {
          const m = /u\d+/.exec(k);
          if (m) holder.set(`${lib}:${m[0]}`, n.port);
        }
        r.disconnect();
      }
      const stopped = holder.get(keys[0] as string) as number;
      cluster.pause(stopped);
      try {
        const results = await Promise.all(
          keys.flatMap((k) => Array.from({ length: 8 }, () => limiter.consume(k).then((d): [string, Decision] => [k, d]))),
        );
        for (const k of keys) {
          const mine = results.filter(([key]) => key === k).map(([, d]) => d);
          if (holder.get(k) === stopped) {
            expect(
              mine.every((d) => !d.allowed && d.reason !== "limit"),
              `${k} on the stopped master`,
            ).toBe(true);
          } else {
            expect(
              mine.filter((d) => d.allowed),
              `${k} on a live master`,
            ).toHaveLength(4);
          }
        }
      } finally {
        cluster.resume(stopped);
      }
      // Back: Redis decides the stopped master's keys again (the breaker's probe closes it).
      const deadline = Date.now() + 60_000;
      let d: Decision | undefined;
      while (Date.now() < deadline) {
        d = await limiter.consume(keys[0] as string);
        if (d.reason === undefined || d.reason === "limit") break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(d?.reason === undefined || d?.reason === "limit").toBe(true);
      await close();
      await new Promise((r) => setTimeout(r, 200));
      expect(unhandled).toEqual([]);
    },
    180_000,
  );
});
