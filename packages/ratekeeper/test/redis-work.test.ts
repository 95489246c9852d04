/**
 * The Redis work of a RedisStore decision: one EVALSHA per decision (several limits included),
 * the commands inside the scripts (INFO commandstats), pipelining in chunks, the EVAL fallback
 * on NOSCRIPT, and the sliding log's O(1) work. The rest of RedisStore's specifics are in
 * redis-store.test.ts.
 */
import { Redis } from "ioredis";
import { expect, it } from "vitest";
import { commandDelta as deltaCalls } from "../../../test-support/redis-commands.js";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { RateLimiter } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { loadScript, SECTIONS_OF } from "../src/stores/redis/scripts.js";
import { PIPELINE_CHUNK } from "../src/stores/redis/pipeline.js";

describeRedis("RedisStore: Redis work", () => {
  const fx = redisStoreFixture();
  const { mk } = fx;

  it("one EVALSHA per decision, several limits included; nothing else from the client", async () => {
    const limiter = mk({
      limits: [
        { algorithm: "gcra", limit: 100, window: 1000 },
        { algorithm: "sliding-window", limit: 1000, window: 60_000, buckets: 6 },
      ],
    });
    await limiter.consume("warm");
    let calls = 0;
    const origEvalsha = fx.client.evalsha.bind(fx.client);
    const spy = fx.client as unknown as { evalsha: (...a: unknown[]) => unknown };
    spy.evalsha = (...a: unknown[]) => {
      calls++;
      return (origEvalsha as (...x: unknown[]) => unknown)(...a);
    };
    try {
      const d = await deltaCalls(fx.admin, async () => {
        for (let i = 0; i < 20; i++) await limiter.consume(`k${i % 3}`);
      });
      expect(calls).toBe(20);
      expect(d.evalsha).toBe(20);
      expect(d.eval).toBeUndefined();
    } finally {
      delete (spy as { evalsha?: unknown }).evalsha;
    }
  });

  it("a fast-path limiter still reads Redis's clock again once per second (RESAMPLE_MS)", async () => {
    // Before, the fast path's check of the clock used up the due reading, and the general path
    // it fell back to then sent the kept offset: TIME was never read again after the first.
    const limiter = mk({ algorithm: "token-bucket", limit: 1_000_000, window: 60_000 }, { batch: false });
    await limiter.consume("warm");
    const d = await deltaCalls(fx.admin, async () => {
      const end = performance.now() + 2_300;
      for (let i = 0; performance.now() < end; i++) await limiter.consume(`k${i % 50}`);
    });
    expect(d.time ?? 0).toBeGreaterThanOrEqual(2);
    expect(d.time ?? 0).toBeLessThanOrEqual(3);
  });

  it("Redis's clock without a TIME per decision: one reading calibrates the store, later calls send it", async () => {
    const limiter = mk({ algorithm: "fixed-window", limit: 1000, window: 60_000 });
    await limiter.consume("warm"); // the first call reads TIME
    const t0 = performance.now();
    const d = await deltaCalls(fx.admin, async () => {
      for (let i = 0; i < 20; i++) await limiter.consume(`k${i}`);
    });
    const elapsedMs = performance.now() - t0;
    expect(d.evalsha).toBe(20);
    // A new reading at most once a second (RESAMPLE_MS); none at all within the first second.
    expect(d.time ?? 0).toBeLessThanOrEqual(Math.ceil(elapsedMs / 1000));
    // Fixed window, admitted: one INCRBY in the script; each key's first decision of its
    // window also sets the window's tag and TTL (SET).
    expect(d.incrby).toBe(20);
    expect(d.set).toBe(20);
    expect(d.get).toBeUndefined();
  });

  it("script calls issued in one turn of the event loop are written together (one pipeline), each its own call", async () => {
    const own = new Redis(fx.redis.port, fx.redis.host);
    try {
      const limiter = new RateLimiter({
        algorithm: "gcra",
        limit: 5,
        window: 60_000,
        burst: 4,
        store: new RedisStore({ client: own, failure: "throw", timeoutMs: 10_000, instances: 1, batch: false }),
        namespace: fx.ns(),
        clock: () => 1_700_000_000_000,
      });
      await limiter.consume("warm");
      let pipelines = 0;
      const orig = own.pipeline.bind(own);
      (own as unknown as { pipeline: typeof own.pipeline }).pipeline = (...a: Parameters<typeof own.pipeline>) => {
        pipelines++;
        return orig(...a);
      };
      const d = await deltaCalls(fx.admin, async () => {
        const ds = await Promise.all(Array.from({ length: 8 }, () => limiter.consume("k")));
        expect(ds.map((x) => x.allowed)).toEqual([true, true, true, true, true, false, false, false]);
      });
      expect(pipelines).toBe(1);
      expect(d.evalsha).toBe(8);
    } finally {
      own.disconnect();
    }
  });

  it("a turn's script calls go out in chunks of PIPELINE_CHUNK, the first while the turn goes on, in order", async () => {
    const own = new Redis(fx.redis.port, fx.redis.host);
    try {
      const limiter = new RateLimiter({
        algorithm: "fixed-window",
        limit: 2 * PIPELINE_CHUNK,
        window: 60_000,
        store: new RedisStore({ client: own, failure: "throw", timeoutMs: 10_000, instances: 1, batch: false }),
        namespace: fx.ns(),
        clock: () => 1_700_000_000_000,
      });
      await limiter.consume("warm");
      const sizes: number[] = [];
      const orig = own.pipeline.bind(own);
      (own as unknown as { pipeline: typeof own.pipeline }).pipeline = (...a: Parameters<typeof own.pipeline>) => {
        sizes.push((a[0] as unknown[]).length);
        return orig(...a);
      };
      const n = 2 * PIPELINE_CHUNK + 6;
      const pending = Array.from({ length: n }, () => limiter.consume("k"));
      // The full chunks were handed to ioredis before the turn ended.
      expect(sizes).toEqual([PIPELINE_CHUNK, PIPELINE_CHUNK]);
      const ds = await Promise.all(pending);
      expect(sizes).toEqual([PIPELINE_CHUNK, PIPELINE_CHUNK, 6]);
      // In order: the first 2 x CHUNK admitted (remaining counting down), the last 6 denied.
      expect(ds.map((x) => x.remaining)).toEqual(Array.from({ length: n }, (_, i) => Math.max(0, 2 * PIPELINE_CHUNK - 1 - i)));
      expect(ds.filter((x) => x.allowed)).toHaveLength(2 * PIPELINE_CHUNK);
    } finally {
      own.disconnect();
    }
  });

  it("falls back to EVAL when the script cache was flushed (restart, failover), then EVALSHA again", async () => {
    const limiter = mk({ algorithm: "fixed-window", limit: 10, window: 60_000 });
    await limiter.consume("k");
    await fx.admin.script("FLUSH");
    const d = await deltaCalls(fx.admin, async () => {
      expect((await limiter.consume("k")).remaining).toBe(8);
      expect((await limiter.consume("k")).remaining).toBe(7);
    });
    expect(d.eval).toBe(1);
    expect(d.evalsha).toBe(2); // the one answered NOSCRIPT, and the next call
  });

  it("sliding log: O(1) reads per decision in steady traffic, whatever the limit (no sorted set)", async () => {
    const perDecision: Record<number, Record<string, number>> = {};
    for (const limit of [10, 128, 129, 10_000]) {
      const clock = { now: 5_000_000 };
      const limiter = mk({ algorithm: "sliding-log", limit, window: limit * 2 }, { minTtlMs: 600_000 }, () => clock.now);
      // Warm up past one full window: the ring is full and wraps.
      for (let i = 0; i < 4 * limit && i < 4000; i++) {
        clock.now += 2;
        await limiter.consume("k");
      }
      const d = await deltaCalls(fx.admin, async () => {
        for (let i = 0; i < 100; i++) {
          clock.now += 2;
          expect((await limiter.consume("k")).allowed).toBe(true);
        }
      });
      expect(Object.keys(d).some((c) => c.startsWith("z"))).toBe(false);
      perDecision[limit] = Object.fromEntries(Object.entries(d).map(([c, v]) => [c, v / 100]));
    }
    // A log of a limit up to 128 (LOG_WHOLE_MAX) is read and rewritten whole: 3 commands.
    for (const limit of [10, 128]) expect(perDecision[limit], String(limit)).toEqual({ evalsha: 1, get: 1, set: 1 });
    // Longer ones: the header and slots 0-15 in one read, one ranged read of the window's edge
    // (a few more where the ring wraps), the entries and the header written, the TTL: the same
    // for 129 and 10000.
    for (const limit of [129, 10_000]) {
      const d = perDecision[limit] as Record<string, number>;
      expect(Object.keys(d).sort(), String(limit)).toEqual(["evalsha", "getrange", "pexpire", "setrange"]);
      expect(d.getrange, String(limit)).toBeLessThanOrEqual(2.2);
      expect(d.setrange, String(limit)).toBeLessThanOrEqual(2);
    }
  });

  it("sliding log: keys the general code wrote (all logs before the fast path) decide the same on the fast path", async () => {
    // The general code's layout is the fast path's: write a log with it (several limits' code,
    // one limit here), then go on with a fast-path limiter on the same key, next to a memory store.
    const spec = { algorithm: "sliding-log" as const, limit: 5, window: 1000 };
    const clock = { now: 7_000_000 };
    const namespace = fx.ns();
    const fast = mk(spec, { minTtlMs: 600_000 }, () => clock.now, namespace);
    const mem = new RateLimiter({ ...spec, clock: () => clock.now, namespace });
    const general = loadScript("ratekeeper", SECTIONS_OF["sliding-log"] as string[]);
    const key = `rk:{${namespace}:k}`;
    const steps = [0, 10, 10, 300, 0, 0, 200, 1, 400, 0, 99, 1, 0];
    for (const [i, dt] of steps.entries()) {
      clock.now += dt;
      const cost = 1 + (i % 3);
      // minTtl, N, then sliding-log (id 1), limit, windowMs, capacity, buckets, weighted, alignFirst, shape; mode, now, cost
      const argv = ["600000", "1", "1", "5", "1000", "5", "1", "0", "0", "0", "c", String(clock.now), String(cost)];
      const reply = (await fx.admin
        .evalsha(general.sha, 1, key, ...argv)
        .catch(() => fx.admin.eval(general.source, 1, key, ...argv))) as number[];
      expect(reply[0], `general step ${i}`).toBe((await mem.consume("k", cost)).allowed ? 1 : 0);
    }
    for (const [i, dt] of [...steps, 1000, 0, 5, 500].entries()) {
      clock.now += dt;
      const cost = 1 + (i % 4);
      expect(await fast.consume("k", cost), `fast step ${i}`).toEqual(await mem.consume("k", cost));
      expect(await fast.peek("k", 2), `peek ${i}`).toEqual(await mem.peek("k", 2));
    }
  });
});
