/**
 * RedisStore specifics beyond the contract: key layout and hash tags, TTLs, memory per key
 * (MEMORY USAGE), batching, the denial cache, script sources, and option validation. The Redis
 * work of a decision (commands, pipelining, NOSCRIPT) is in redis-work.test.ts.
 */
import { describe, expect, it } from "vitest";
import { commandDelta as deltaCalls } from "../../../test-support/redis-commands.js";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { RateLimitConfigError, RateLimiter, type LimitSpec } from "../src/index.js";
import { createHash } from "node:crypto";
import { RedisStore } from "../src/stores/redis/index.js";
import { loadScript, SECTIONS_OF } from "../src/stores/redis/scripts.js";

describeRedis("RedisStore", () => {
  const fx = redisStoreFixture();
  const { mk } = fx;

  describe("keys", () => {
    it("one key per limit, <prefix>{<namespace>:<key>}:<index>, each with a TTL of resetAfterMs (server time; a fixed window's counter: + minTtlMs)", async () => {
      const limiter = mk({
        limits: [
          { algorithm: "fixed-window", limit: 5, window: 60_000 },
          { algorithm: "sliding-log", limit: 3, window: 10_000 },
        ],
      });
      const d = await limiter.consume("user:{42}");
      const keys = (await fx.admin.keys(`rk:{${limiter.namespace}:*`)).sort();
      expect(keys).toEqual([`rk:{${limiter.namespace}:user:{42}}:0`, `rk:{${limiter.namespace}:user:{42}}:1`]);
      for (const [i, key] of keys.entries()) {
        const ttl = await fx.admin.pttl(key);
        const reset = d.limits?.[i]?.resetAfterMs as number;
        expect(ttl, key).toBeGreaterThan(0);
        // The fixed window is in the counter layout (stores/redis/counter.ts): its key lives the
        // default minTtlMs (5 s) past the window's end, so a lagging decision still finds it.
        expect(ttl, key).toBeLessThanOrEqual(i === 0 ? reset + 5_000 : reset);
        if (i === 0) expect(ttl, key).toBeGreaterThan(reset);
      }
      // Same hash slot for every key of the decision.
      const slots = await Promise.all(keys.map((k) => fx.admin.cluster("KEYSLOT", k).catch(() => null)));
      if (slots[0] !== null) expect(new Set(slots).size).toBe(1);
    });

    it("a namespace's ':' and '%' are written %3A and %25 in its keys; a namespace without them keeps its keys byte for byte", async () => {
      const spec = { algorithm: "fixed-window", limit: 5, window: 60_000 } as const;
      const base = fx.ns();
      await mk(spec, {}, undefined, base).consume("b:x");
      await mk(spec, {}, undefined, `${base}:b`).consume("x");
      await mk(spec, {}, undefined, `${base}%:b`).consume("x");
      await mk({ limits: [spec, spec] }, {}, undefined, `${base}.m:b`).consume("x");
      const keys = (await fx.admin.keys(`rk:{${base}[:%.]*`)).sort();
      // The first is the layout every existing deployment's default namespaces (policy ids) use.
      expect(keys).toEqual(
        [`rk:{${base}%25%3Ab:x}`, `rk:{${base}%3Ab:x}`, `rk:{${base}.m%3Ab:x}:0`, `rk:{${base}.m%3Ab:x}:1`, `rk:{${base}:b:x}`].sort(),
      );
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
      expect(await fx.admin.pttl(key)).toBeGreaterThan(100_000);
      await fx.admin.pexpire(key, 50_000);
      await limiter.refund("k");
      const ttl = await fx.admin.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(50_000);
      await limiter.reset("k");
      expect(await fx.admin.exists(key)).toBe(0);
    });

    it("a denial, a peek and a refund of an unknown key write nothing", async () => {
      const limiter = mk({ algorithm: "sliding-window", limit: 1, window: 60_000 });
      await limiter.peek("a");
      await limiter.refund("a");
      expect(await fx.admin.keys(`rk:{${limiter.namespace}:*`)).toEqual([]);
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
      const store = new RedisStore({ client: fx.client, failure: "throw", timeoutMs: 10_000, instances: 1 });
      const limiter = new RateLimiter({ ...(compact[name] as LimitSpec), store, namespace: undefined });
      await limiter.reset("user:12345");
      for (let i = 0; i < 3; i++) await limiter.consume("user:12345");
      const bytes = Number(await fx.admin.memory("USAGE", `rk:{${limiter.namespace}:user:12345}`));
      expect(bytes).toBeGreaterThan(0);
      expect(bytes).toBeLessThanOrEqual(100);
    });

    it("sliding-window with 60 sub-windows: one key", async () => {
      const limiter = mk({ algorithm: "sliding-window", limit: 1000, window: 60_000, buckets: 60 });
      for (let i = 0; i < 5; i++) await limiter.consume("user:12345");
      const keys = await fx.admin.keys(`rk:{${limiter.namespace}:*`);
      expect(keys).toHaveLength(1);
      // 61 counters and the newest index, 6 bytes each (i6), in one string.
      expect(Number(await fx.admin.strlen(keys[0] as string))).toBe(62 * 6);
    });

    it("sliding-log, limit 100, full: at most 12 bytes per stored timestamp", async () => {
      const limiter = mk({ algorithm: "sliding-log", limit: 100, window: 3_600_000 });
      for (let i = 0; i < 100; i++) expect((await limiter.consume("user:12345")).allowed).toBe(true);
      const bytes = Number(await fx.admin.memory("USAGE", `rk:{${limiter.namespace}:user:12345}`));
      expect(bytes / 100).toBeLessThanOrEqual(12);
    });
  });

  describe("batch", () => {
    it("decisions waiting while others are in flight go together: fewer script calls, same answers", async () => {
      const limiter = mk({ algorithm: "gcra", limit: 10, window: 3_600_000, burst: 9 }, { batch: true });
      await limiter.consume("warm");
      let decisions: Awaited<ReturnType<typeof limiter.consume>>[] = [];
      const d = await deltaCalls(fx.admin, async () => {
        decisions = await Promise.all(Array.from({ length: 50 }, () => limiter.consume("k")));
      });
      expect(decisions.filter((x) => x.allowed)).toHaveLength(10);
      expect(decisions.slice(0, 10).every((x) => x.allowed)).toBe(true); // in call order
      expect(d.evalsha).toBeLessThanOrEqual(4); // 2 sent at once, then the other 48 together
      expect(d.get).toBe(50);
    });

    it("maxBatch must be a whole number from 1 to 10000", () => {
      expect(() => new RedisStore({ client: fx.client, batch: { maxBatch: 0 } })).toThrow(/batch\.maxBatch/);
    });
  });

  describe("denial cache", () => {
    it("answers a denied key locally until retryAfterMs passes, only for costs at least as large", async () => {
      const clock = { now: 9_000_000 };
      const limiter = mk({ algorithm: "token-bucket", limit: 3, window: 3000 }, { denialCache: true, minTtlMs: 600_000 }, () => clock.now);
      await limiter.consume("k", 3);
      const denied = await limiter.consume("k", 2);
      expect([denied.allowed, denied.reason, denied.retryAfterMs]).toEqual([false, "limit", 2000]);
      const d = await deltaCalls(fx.admin, async () => {
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
        new RedisStore({
          client: fx.client,
          timeoutMs: -1,
          failure: "sideways" as never,
          denialCache: { maxKeys: 0 },
          prefix: "a{b",
          minTtlMs: 1.5,
        });
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
