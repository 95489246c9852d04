/**
 * The race test: four processes, each with its own Redis connection, fire 100 concurrent consumes
 * each at one fresh key. Read-then-write would let too much through; one atomic script per
 * decision admits exactly the allowance, for every algorithm, on one Redis and on a 3-master
 * cluster, and for two-limit policies (all-or-nothing: the denied requests charge no limit).
 * Windows are a day or longer, so no allowance refills during the burst.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { startRedisCluster, type RedisClusterHandle } from "../../../test-support/redis-cluster.js";
import type { LimitSpec } from "../src/index.js";
import { WorkerPool } from "./fixtures/worker-pool.js";

const WORKERS = 4;
const CONCURRENCY = 100; // per worker: 400 in flight against an allowance of 100
const DAY = 86_400_000;

const SINGLE: Record<string, LimitSpec> = {
  "fixed-window": { algorithm: "fixed-window", limit: 100, window: 30 * DAY },
  "fixed-window first-request": { algorithm: "fixed-window", limit: 100, window: DAY, align: "first-request" },
  "sliding-log": { algorithm: "sliding-log", limit: 100, window: DAY },
  "sliding-window": { algorithm: "sliding-window", limit: 100, window: DAY },
  "sliding-window 24 buckets": { algorithm: "sliding-window", limit: 100, window: DAY, buckets: 24, weighted: false },
  "token-bucket": { algorithm: "token-bucket", limit: 100, window: DAY },
  "leaky-bucket": { algorithm: "leaky-bucket", limit: 100, window: DAY },
  "leaky-bucket shape": { algorithm: "leaky-bucket", limit: 100, window: DAY, mode: "shape" },
  gcra: { algorithm: "gcra", limit: 100, window: DAY, burst: 99 },
};

let seq = 0;

function raceSuite(topology: string, start: () => Promise<{ pool: WorkerPool; stop: () => Promise<void> }>) {
  describe(topology, () => {
    let pool: WorkerPool;
    let stop: () => Promise<void>;
    beforeAll(async () => {
      ({ pool, stop } = await start());
    });
    afterAll(async () => {
      await pool?.stop();
      await stop?.();
    });

    it("control: a read-then-write counter over-admits under the same burst (the test can fail)", async () => {
      const r = await pool.burst({
        limits: [SINGLE["fixed-window"] as LimitSpec],
        namespace: `naive-${topology}-${++seq}`,
        key: "hot",
        concurrency: CONCURRENCY,
        naive: true,
      });
      expect(r.errors).toBe(0);
      expect(r.admitted).toBeGreaterThan(100);
    });

    it.each(Object.keys(SINGLE))("%s: admits exactly 100 of 400 concurrent requests", async (name) => {
      const r = await pool.burst({
        limits: [SINGLE[name] as LimitSpec],
        namespace: `race-${topology}-${++seq}`,
        key: "hot",
        concurrency: CONCURRENCY,
      });
      expect(r.errors).toBe(0);
      expect(r.admitted).toBe(100);
    });

    it("two limits (fixed window 100 + sliding log 60): admits 60; the denials charged neither", async () => {
      const limits: LimitSpec[] = [
        { algorithm: "fixed-window", limit: 100, window: 30 * DAY, name: "monthly" },
        { algorithm: "sliding-log", limit: 60, window: DAY, name: "daily" },
      ];
      const r = await pool.burst({ limits, namespace: `race2-${topology}-${++seq}`, key: "hot", concurrency: CONCURRENCY });
      expect(r.errors).toBe(0);
      expect(r.admitted).toBe(60);
      const d = await pool.peek(0);
      expect(d.limits?.map((l) => l.remaining)).toEqual([40, 0]); // 100 - 60 left (the peek charged nothing), and none
    });

    it("two limits (token bucket 50 + gcra 80): admits 50", async () => {
      const limits: LimitSpec[] = [
        { algorithm: "token-bucket", limit: 50, window: DAY },
        { algorithm: "gcra", limit: 80, window: DAY, burst: 79 },
      ];
      const r = await pool.burst({ limits, namespace: `race3-${topology}-${++seq}`, key: "hot", concurrency: CONCURRENCY });
      expect(r.errors).toBe(0);
      expect(r.admitted).toBe(50);
      const d = await pool.peek(0);
      expect(d.limits?.[1]?.remaining).toBe(80 - 50); // the peek was denied by the bucket: nothing charged
    });
  });
}

describeRedis("race: many processes, one key", () => {
  raceSuite("single redis-server", async () => {
    const redis: RedisHandle = await startRedis();
    const pool = await WorkerPool.start(Array.from({ length: WORKERS }, () => ({ nodes: [redis], cluster: false })));
    return { pool, stop: () => redis.stop() };
  });

  raceSuite("single redis-server, batch: true", async () => {
    const redis: RedisHandle = await startRedis();
    const pool = await WorkerPool.start(Array.from({ length: WORKERS }, () => ({ nodes: [redis], cluster: false, batch: true })));
    return { pool, stop: () => redis.stop() };
  });

  raceSuite("3-master cluster, batch: true (per hash slot)", async () => {
    const cluster: RedisClusterHandle = await startRedisCluster(3);
    const pool = await WorkerPool.start(Array.from({ length: WORKERS }, () => ({ nodes: cluster.nodes, cluster: true, batch: true })));
    return { pool, stop: () => cluster.stop() };
  });
});
