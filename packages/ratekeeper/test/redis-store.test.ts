/**
 * RedisStore specifics beyond the contract: key layout and hash tags, TTLs, memory per key
 * (MEMORY USAGE), one script call per decision, the EVAL fallback on NOSCRIPT, the sliding log's
 * O(1) Redis work, the denial cache, and option validation.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commandDelta as deltaCalls } from "../../../test-support/redis-commands.js";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { RateLimitConfigError, RateLimiter, type LimitSpec } from "../src/index.js";
import { createHash } from "node:crypto";
import { RedisStore, type RedisStoreOptions } from "../src/stores/redis/index.js";
import { loadScript, SECTIONS_OF } from "../src/stores/redis/scripts.js";
import { PIPELINE_CHUNK } from "../src/stores/redis/pipeline.js";

let seq = 0;
const ns = () => `st${++seq}`;

describeRedis("RedisStore", () => {
  let redis: RedisHandle;
  let client: Redis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
    admin = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    admin?.disconnect();
    await redis?.stop();
  });

  // Every store here has a fixed instance count (`instances: 1`): otherwise each one, from its first
  // use on, renews its entry in the instance registry every 5 s (a script with TIME and a sorted
  // set) until the process ends, and the tests that count the commands a decision makes
  // (INFO commandstats, server-wide) would count a heartbeat that fell inside their loop. Seen
  // under a saturated CPU, where the loops take longer: "zadd", "zcard", "time" in a sliding
  // log's 100 decisions.
  const mk = (spec: LimitSpec | { limits: LimitSpec[] }, opts: Partial<RedisStoreOptions> = {}, clock?: () => number, namespace = ns()) =>
    new RateLimiter({
      ...spec,
      store: new RedisStore({ client, failure: "throw", timeoutMs: 10_000, instances: 1, ...opts }),
      namespace,
      ...(clock ? { clock } : {}),
    });

  describe("keys", () => {
    it("one key per limit, <prefix>{<namespace>:<key>}:<index>, each with a TTL of resetAfterMs (server time; a fixed window's counter: + minTtlMs)", async () => {
      const limiter = mk({
        limits: [
          { algorithm: "fixed-window", limit: 5, window: 60_000 },
          { algorithm: "sliding-log", limit: 3, window: 10_000 },
        ],
      });
      const d = await limiter.consume("user:{42}");
      const keys = (await admin.keys(`rk:{${limiter.namespace}:*`)).sort();
      expect(keys).toEqual([`rk:{${limiter.namespace}:user:{42}}:0`, `rk:{${limiter.namespace}:user:{42}}:1`]);
      for (const [i, key] of keys.entries()) {
        const ttl = await admin.pttl(key);
        const reset = d.limits?.[i]?.resetAfterMs as number;
        expect(ttl, key).toBeGreaterThan(0);
        // The fixed window is in the counter layout (stores/redis/counter.ts): its key lives the
        // default minTtlMs (5 s) past the window's end, so a lagging decision still finds it.
        expect(ttl, key).toBeLessThanOrEqual(i === 0 ? reset + 5_000 : reset);
        if (i === 0) expect(ttl, key).toBeGreaterThan(reset);
      }
      // Same hash slot for every key of the decision.
      const slots = await Promise.all(keys.map((k) => admin.cluster("KEYSLOT", k).catch(() => null)));
      if (slots[0] !== null) expect(new Set(slots).size).toBe(1);
    });

    it("by default a decision whose time reading lags Redis (a queued call, another process's clock) is still charged to its window", async () => {
      // The window ends 200 ms after the first decision by the injected clock; that clock then
      // stands still for 400 ms of real time, as a decision's reading does while it waits in a
      // queue. A key whose TTL were exactly resetAfterMs by Redis's clock would be gone when the
      // second decision runs, and it would be admitted afresh in the same window.
      const clock = { now: 1_000_100 };
      const limiter = mk({ algorithm: "fixed-window", limit: 1, window: 300 }, {}, () => clock.now);
      expect((await limiter.consume("lag")).allowed).toBe(true);
      await new Promise((r) => setTimeout(r, 400));
      expect((await limiter.consume("lag")).allowed).toBe(false);
    });

    it("minTtlMs raises short TTLs; refund keeps the TTL; reset deletes every key", async () => {
      const clock = { now: 1_000_000 };
      const limiter = mk({ algorithm: "token-bucket", limit: 10, window: 1000 }, { minTtlMs: 120_000, prefix: "t:" }, () => clock.now);
      await limiter.consume("k");
      const key = `t:{${limiter.namespace}:k}`;
      expect(await admin.pttl(key)).toBeGreaterThan(100_000);
      await admin.pexpire(key, 50_000);
      await limiter.refund("k");
      const ttl = await admin.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(50_000);
      await limiter.reset("k");
      expect(await admin.exists(key)).toBe(0);
    });

    it("a denial, a peek and a refund of an unknown key write nothing", async () => {
      const limiter = mk({ algorithm: "sliding-window", limit: 1, window: 60_000 });
      await limiter.peek("a");
      await limiter.refund("a");
      expect(await admin.keys(`rk:{${limiter.namespace}:*`)).toEqual([]);
    });
  });

  describe("memory per key (MEMORY USAGE, key user:12345 under the default namespace)", () => {
    const compact: Record<string, LimitSpec> = {
      "fixed-window": { algorithm: "fixed-window", limit: 100, window: 60_000 },
      "token-bucket": { algorithm: "token-bucket", limit: 100, window: 60_000 },
      "leaky-bucket": { algorithm: "leaky-bucket", limit: 100, window: 60_000 },
      gcra: { algorithm: "gcra", limit: 100, window: 60_000, burst: 20 },
    };
    it.each(Object.keys(compact))("%s: at most 100 bytes", async (name) => {
      const store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000, instances: 1 });
      const limiter = new RateLimiter({ ...(compact[name] as LimitSpec), store, namespace: undefined });
      await limiter.reset("user:12345");
      for (let i = 0; i < 3; i++) await limiter.consume("user:12345");
      const bytes = Number(await admin.memory("USAGE", `rk:{${limiter.namespace}:user:12345}`));
      expect(bytes).toBeGreaterThan(0);
      expect(bytes).toBeLessThanOrEqual(100);
    });

    it("sliding-window with 60 sub-windows: one key", async () => {
      const limiter = mk({ algorithm: "sliding-window", limit: 1000, window: 60_000, buckets: 60 });
      for (let i = 0; i < 5; i++) await limiter.consume("user:12345");
      const keys = await admin.keys(`rk:{${limiter.namespace}:*`);
      expect(keys).toHaveLength(1);
      // 61 counters and the newest index, 6 bytes each (i6), in one string.
      expect(Number(await admin.strlen(keys[0] as string))).toBe(62 * 6);
    });

    it("sliding-log, limit 100, full: at most 12 bytes per stored timestamp", async () => {
      const limiter = mk({ algorithm: "sliding-log", limit: 100, window: 3_600_000 });
      for (let i = 0; i < 100; i++) expect((await limiter.consume("user:12345")).allowed).toBe(true);
      const bytes = Number(await admin.memory("USAGE", `rk:{${limiter.namespace}:user:12345}`));
      expect(bytes / 100).toBeLessThanOrEqual(12);
    });
  });

  describe("Redis work", () => {
    it("one EVALSHA per decision, several limits included; nothing else from the client", async () => {
      const limiter = mk({
        limits: [
          { algorithm: "gcra", limit: 100, window: 1000 },
          { algorithm: "sliding-window", limit: 1000, window: 60_000, buckets: 6 },
        ],
      });
      await limiter.consume("warm");
      let calls = 0;
      const origEvalsha = client.evalsha.bind(client);
      const spy = client as unknown as { evalsha: (...a: unknown[]) => unknown };
      spy.evalsha = (...a: unknown[]) => {
        calls++;
        return (origEvalsha as (...x: unknown[]) => unknown)(...a);
      };
      try {
        const d = await deltaCalls(admin, async () => {
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
      const d = await deltaCalls(admin, async () => {
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
      const d = await deltaCalls(admin, async () => {
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
      const own = new Redis(redis.port, redis.host);
      try {
        const limiter = new RateLimiter({
          algorithm: "gcra",
          limit: 5,
          window: 60_000,
          burst: 4,
          store: new RedisStore({ client: own, failure: "throw", timeoutMs: 10_000, instances: 1, batch: false }),
          namespace: ns(),
          clock: () => 1_700_000_000_000,
        });
        await limiter.consume("warm");
        let pipelines = 0;
        const orig = own.pipeline.bind(own);
        (own as unknown as { pipeline: typeof own.pipeline }).pipeline = (...a: Parameters<typeof own.pipeline>) => {
          pipelines++;
          return orig(...a);
        };
        const d = await deltaCalls(admin, async () => {
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
      const own = new Redis(redis.port, redis.host);
      try {
        const limiter = new RateLimiter({
          algorithm: "fixed-window",
          limit: 2 * PIPELINE_CHUNK,
          window: 60_000,
          store: new RedisStore({ client: own, failure: "throw", timeoutMs: 10_000, instances: 1, batch: false }),
          namespace: ns(),
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
      await admin.script("FLUSH");
      const d = await deltaCalls(admin, async () => {
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
        const d = await deltaCalls(admin, async () => {
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
      const namespace = ns();
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
        const reply = (await admin
          .evalsha(general.sha, 1, key, ...argv)
          .catch(() => admin.eval(general.source, 1, key, ...argv))) as number[];
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

  describe("batch", () => {
    it("decisions waiting while others are in flight go together: fewer script calls, same answers", async () => {
      const limiter = mk({ algorithm: "gcra", limit: 10, window: 3_600_000, burst: 9 }, { batch: true });
      await limiter.consume("warm");
      let decisions: Awaited<ReturnType<typeof limiter.consume>>[] = [];
      const d = await deltaCalls(admin, async () => {
        decisions = await Promise.all(Array.from({ length: 50 }, () => limiter.consume("k")));
      });
      expect(decisions.filter((x) => x.allowed)).toHaveLength(10);
      expect(decisions.slice(0, 10).every((x) => x.allowed)).toBe(true); // in call order
      expect(d.evalsha).toBeLessThanOrEqual(4); // 2 sent at once, then the other 48 together
      expect(d.get).toBe(50);
    });

    it("maxBatch must be a whole number from 1 to 10000", () => {
      expect(() => new RedisStore({ client, batch: { maxBatch: 0 } })).toThrow(/batch\.maxBatch/);
    });
  });

  describe("denial cache", () => {
    it("answers a denied key locally until retryAfterMs passes, only for costs at least as large", async () => {
      const clock = { now: 9_000_000 };
      const limiter = mk({ algorithm: "token-bucket", limit: 3, window: 3000 }, { denialCache: true, minTtlMs: 600_000 }, () => clock.now);
      await limiter.consume("k", 3);
      const denied = await limiter.consume("k", 2);
      expect([denied.allowed, denied.reason, denied.retryAfterMs]).toEqual([false, "limit", 2000]);
      const d = await deltaCalls(admin, async () => {
        clock.now += 500;
        const again = await limiter.consume("k", 2);
        expect([again.allowed, again.reason, again.retryAfterMs]).toEqual([false, "denial-cache", 1500]);
        expect((await limiter.consume("k", 3)).reason).toBe("denial-cache");
      });
      expect(d.evalsha).toBeUndefined();
      // A smaller cost goes to Redis (it may fit): one token has refilled by now.
      expect((await limiter.consume("k", 1)).allowed).toBe(false); // 500 ms: half a token
      clock.now += 1500;
      const after = await limiter.consume("k", 2);
      expect([after.allowed, after.reason]).toEqual([true, undefined]);
    });

    it("is bounded by maxKeys (oldest dropped) and cleared by reset", async () => {
      const clock = { now: 9_000_000 };
      const limiter = mk(
        { algorithm: "fixed-window", limit: 1, window: 60_000 },
        { denialCache: { maxKeys: 2 }, minTtlMs: 600_000 },
        () => clock.now,
      );
      for (const k of ["a", "b", "c"]) {
        await limiter.consume(k);
        expect((await limiter.consume(k)).reason).toBe("limit");
      }
      expect((await limiter.consume("c")).reason).toBe("denial-cache");
      expect((await limiter.consume("a")).reason).toBe("limit"); // dropped: asked Redis again
      await limiter.reset("c");
      expect((await limiter.consume("c")).allowed).toBe(true);
    });
  });

  describe("scripts", () => {
    it("each build keeps the header and only its algorithms' sections; the SHA is the source's SHA1", () => {
      const fw = loadScript("ratekeeper", SECTIONS_OF["fixed-window"] as string[]);
      const all = loadScript("ratekeeper", Object.values(SECTIONS_OF).flat());
      for (const sc of [fw, all]) {
        expect(sc.source).toMatch(/^--\[\[\nratekeeper\.lua/);
        expect(sc.source).toContain("KEYS[(d-1)*N + i]");
        expect(sc.sha).toBe(createHash("sha1").update(sc.source).digest("hex"));
        expect(sc.source).not.toContain("--[[@if");
        // The header is one long comment: nothing inside may close it early.
        expect(sc.source.indexOf("]]")).toBe(sc.source.indexOf("\n]]\n") + 1);
      }
      expect(fw.source).toContain("local function fwCheck");
      expect(fw.source).not.toContain("local function slCheck");
      expect(fw.source).not.toContain("local function bkCheck");
      expect(all.source).toContain("local function slCheck");
      expect(fw.sha).not.toBe(all.sha);
    });

    it("a fast-path limiter's script carries its limit's constants (its own SHA); bad constants are refused", () => {
      const sections = [...(SECTIONS_OF["token-bucket"] as string[]), "fast-pair"];
      const consts = { limit: 100, windowMs: 60_000, kind: "b", capacity: 100, minTtlMs: 5_000 };
      const a = loadScript("ratekeeper", sections, consts);
      const b = loadScript("ratekeeper", sections, { ...consts, limit: 101 });
      expect(a.source).toContain('local limit, W, kind, capacity, minTtl = 100, 60000, "b", 100, 5000 -- @fast-consts');
      expect(a.sha).not.toBe(b.sha);
      expect(loadScript("ratekeeper", sections, consts)).toBe(a); // cached
      expect(() => loadScript("ratekeeper", sections, { ...consts, kind: 'b", os.exit() --' })).toThrow(/bad script constant/);
      expect(() => loadScript("ratekeeper", sections, { ...consts, limit: Number.NaN })).toThrow(/bad script constant/);
      expect(() => loadScript("ratekeeper", SECTIONS_OF["token-bucket"] as string[], consts)).toThrow(/no "@fast-consts" line/);
    });
  });

  describe("options", () => {
    it("bad options throw a RateLimitConfigError naming each field", () => {
      expect(() => new RedisStore({ client: {} as never })).toThrow(/client: must be an ioredis Redis or Cluster/);
      let err: unknown;
      try {
        new RedisStore({ client, timeoutMs: -1, failure: "sideways" as never, denialCache: { maxKeys: 0 }, prefix: "a{b", minTtlMs: 1.5 });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(RateLimitConfigError);
      expect((err as RateLimitConfigError).issues.map((i) => i.path).sort()).toEqual([
        "denialCache.maxKeys",
        "failure",
        "minTtlMs",
        "prefix",
        "timeoutMs",
      ]);
    });
  });
});
