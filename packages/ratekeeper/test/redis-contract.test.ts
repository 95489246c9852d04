/**
 * The store contract (test/contract.ts) against RedisStore: ioredis and node-redis, on a single
 * redis-server and on a 3-master Redis Cluster, each started by test-support on free ports.
 */
import { Cluster, Redis } from "ioredis";
import { createClient, createCluster } from "redis";
import { afterAll, beforeAll, describe } from "vitest";
import { startRedis, describeRedis, type RedisHandle } from "../../../test-support/redis.js";
import { startRedisCluster, type RedisClusterHandle } from "../../../test-support/redis-cluster.js";
import { RedisStore, type RedisClientLike } from "../src/stores/redis/index.js";
import { concurrencyContract } from "./concurrency-contract.js";
import { storeContract } from "./contract.js";

/** With an injected clock the TTLs are logical: keep keys for the test's real duration. */
const storeOptions = { failure: "throw", timeoutMs: 10_000, minTtlMs: 600_000 } as const;

describeRedis("RedisStore contract", () => {
  let redis: RedisHandle;
  let cluster: RedisClusterHandle;
  const closers: Array<() => Promise<unknown>> = [];
  beforeAll(async () => {
    [redis, cluster] = await Promise.all([startRedis(), startRedisCluster(3)]);
  });
  afterAll(async () => {
    for (const c of closers) await c().catch(() => undefined);
    await Promise.all([redis?.stop(), cluster?.stop()]);
  });

  function target(connect: () => Promise<RedisClientLike>) {
    let store: RedisStore | undefined;
    beforeAll(async () => {
      store = new RedisStore({ client: await connect(), ...storeOptions });
    });
    return { store: () => store as RedisStore };
  }

  function contracts(t: { store: () => RedisStore }) {
    storeContract(t);
    concurrencyContract(t);
  }

  describe("ioredis Redis", () => {
    contracts(
      target(() => {
        const c = new Redis(redis.port, redis.host);
        closers.push(() => Promise.resolve(c.disconnect()));
        return Promise.resolve(c);
      }),
    );
  });

  describe("node-redis client", () => {
    contracts(
      target(async () => {
        const c = createClient({ url: redis.url });
        await c.connect();
        closers.push(() => c.close());
        return c;
      }),
    );
  });

  describe("ioredis Cluster", () => {
    contracts(
      target(() => {
        const c = new Cluster(cluster.nodes);
        closers.push(() => Promise.resolve(c.disconnect()));
        return Promise.resolve(c);
      }),
    );
  });

  describe("node-redis cluster", () => {
    contracts(
      target(async () => {
        const c = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
        await c.connect();
        closers.push(() => c.close());
        return c;
      }),
    );
  });
});
