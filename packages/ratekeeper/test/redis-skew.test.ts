/**
 * The skew test: two app servers (processes) whose clocks differ by 15 minutes share one Redis.
 * With no clock injected the store reads Redis's TIME, so together they admit exactly the limit.
 * The control injects each process's own (skewed) clock and lets twice the limit through, which
 * shows the test would catch a store that trusted app-server clocks.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import type { LimitSpec } from "../src/index.js";
import { WorkerPool } from "./fixtures/worker-pool.js";

const SKEW_MS = 15 * 60_000;
const TEN_MIN = 10 * 60_000;

const SPECS: Record<string, LimitSpec> = {
  "sliding-log": { algorithm: "sliding-log", limit: 10, window: TEN_MIN },
  "fixed-window first-request": { algorithm: "fixed-window", limit: 10, window: TEN_MIN, align: "first-request" },
  "sliding-window": { algorithm: "sliding-window", limit: 10, window: TEN_MIN, buckets: 10 },
  "token-bucket": { algorithm: "token-bucket", limit: 10, window: TEN_MIN },
  gcra: { algorithm: "gcra", limit: 10, window: TEN_MIN, burst: 9 },
};

let seq = 0;

describeRedis("skew: app servers 15 minutes apart share one limit", () => {
  let redis: RedisHandle;
  let pool: WorkerPool;
  beforeAll(async () => {
    redis = await startRedis();
    pool = await WorkerPool.start([
      { nodes: [redis], cluster: false, skewMs: 0 },
      { nodes: [redis], cluster: false, skewMs: SKEW_MS },
    ]);
  });
  afterAll(async () => {
    await pool?.stop();
    await redis?.stop();
  });

  it.each(Object.keys(SPECS))("%s: server time admits exactly the limit; skewed local clocks admit twice", async (name) => {
    const limits = [SPECS[name] as LimitSpec];
    // Server time (no clock injected): the behind server first, then the ahead one, then both at once.
    let ns = `skew-${++seq}`;
    const a = await pool.burst({ limits, namespace: ns, key: "k", concurrency: 20 }, [0]);
    const b = await pool.burst({ limits, namespace: ns, key: "k", concurrency: 20 }, [1]);
    expect([a.errors, b.errors]).toEqual([0, 0]);
    expect(a.admitted + b.admitted).toBe(10);
    ns = `skew-${++seq}`;
    const both = await pool.burst({ limits, namespace: ns, key: "k", concurrency: 20 });
    expect(both.errors).toBe(0);
    expect(both.admitted).toBe(10);

    // Control: each process's own clock injected.
    ns = `skew-${++seq}`;
    const ca = await pool.burst({ limits, namespace: ns, key: "k", concurrency: 20, injectClock: true }, [0]);
    const cb = await pool.burst({ limits, namespace: ns, key: "k", concurrency: 20, injectClock: true }, [1]);
    expect(ca.admitted + cb.admitted).toBe(20);
  });
});
