/**
 * Exact under overload: the CPU is saturated (one busy-loop process per core for the whole file),
 * then four processes fire 500 concurrent consumes each at one fresh key with a RedisStore built
 * with DEFAULT options. Redis is healthy all along, so every decision must come from Redis: the
 * admitted count is exactly the allowance and no decision carries a failure policy's reason.
 * A store whose timeout counted the time a decision spent queued in a busy process (event-loop
 * lag, its own backlog) would time its backlog out and let the failure policy answer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { saturateCpu, type CpuLoad } from "../../../test-support/cpu.js";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { startRedisCluster, type RedisClusterHandle } from "../../../test-support/redis-cluster.js";
import type { LimitSpec } from "../src/index.js";
import { WorkerPool } from "./fixtures/worker-pool.js";

const WORKERS = 4;
const CONCURRENCY = 500; // per worker: 2,000 in flight against an allowance of 50
const DAY = 86_400_000;

const POLICIES: Record<string, { limits: LimitSpec[]; allowance: number }> = {
  "fixed-window": { limits: [{ algorithm: "fixed-window", limit: 50, window: 30 * DAY }], allowance: 50 },
  "sliding-log": { limits: [{ algorithm: "sliding-log", limit: 50, window: DAY }], allowance: 50 },
  "sliding-window": { limits: [{ algorithm: "sliding-window", limit: 50, window: DAY }], allowance: 50 },
  "token-bucket": { limits: [{ algorithm: "token-bucket", limit: 50, window: DAY }], allowance: 50 },
  "leaky-bucket shape": { limits: [{ algorithm: "leaky-bucket", limit: 50, window: DAY, mode: "shape" }], allowance: 50 },
  gcra: { limits: [{ algorithm: "gcra", limit: 50, window: DAY, burst: 49 }], allowance: 50 },
  "two limits (fixed window 50 + sliding log 30)": {
    limits: [
      { algorithm: "fixed-window", limit: 50, window: 30 * DAY, name: "monthly" },
      { algorithm: "sliding-log", limit: 30, window: DAY, name: "daily" },
    ],
    allowance: 30,
  },
};

/** Reasons a decision carries when the store did not decide it (every failure policy). */
const POLICY_REASONS = ["store-error", "insurance", "degraded"];

let seq = 0;

function overloadSuite(topology: string, start: () => Promise<{ pool: WorkerPool; stop: () => Promise<void> }>) {
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

    it.each(Object.keys(POLICIES))("%s: exactly the allowance, and no decision from a failure policy", async (name) => {
      const { limits, allowance } = POLICIES[name] as (typeof POLICIES)[string];
      const r = await pool.burst({ limits, namespace: `overload-${topology}-${++seq}`, key: "hot", concurrency: CONCURRENCY });
      expect(r.errors).toBe(0);
      const fromPolicy = Object.fromEntries(Object.entries(r.reasons).filter(([k]) => POLICY_REASONS.includes(k)));
      expect(fromPolicy).toEqual({});
      expect(r.admitted).toBe(allowance);
    });
  });
}

describeRedis("overload: CPU saturated, default RedisStore options, 4 processes x 500 on one key", () => {
  let load: CpuLoad;
  beforeAll(() => {
    load = saturateCpu();
  });
  afterAll(async () => {
    await load?.stop();
  });

  overloadSuite("single redis-server", async () => {
    const redis: RedisHandle = await startRedis();
    const pool = await WorkerPool.start(Array.from({ length: WORKERS }, () => ({ nodes: [redis], cluster: false, defaults: true })));
    return { pool, stop: () => redis.stop() };
  });

  // Unbatched, each decision is its own script call in flight (fast-op.ts on the fast path).
  overloadSuite("single redis-server, batch: false", async () => {
    const redis: RedisHandle = await startRedis();
    const pool = await WorkerPool.start(
      Array.from({ length: WORKERS }, () => ({ nodes: [redis], cluster: false, defaults: true, batch: false })),
    );
    return { pool, stop: () => redis.stop() };
  });

  overloadSuite("3-master cluster", async () => {
    const cluster: RedisClusterHandle = await startRedisCluster(3);
    const pool = await WorkerPool.start(Array.from({ length: WORKERS }, () => ({ nodes: cluster.nodes, cluster: true, defaults: true })));
    return { pool, stop: () => cluster.stop() };
  });
});
