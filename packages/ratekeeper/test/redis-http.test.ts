/**
 * HttpRedisStore (ratekeeper/redis-http) through the real `@upstash/redis` client, against a real
 * redis-server behind a small stand-in for Upstash's REST API (test-support/redis-rest.ts): the
 * store contract, state shared exactly with RedisStore on the same Redis, the EVAL fallback, and
 * each failure policy.
 */
import { Redis as Upstash } from "@upstash/redis";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { startRedisRest, type RedisRestHandle } from "../../../test-support/redis-rest.js";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { MemoryStore, RateLimitConfigError, RateLimiter, RateLimitStoreError, type LimitSpec } from "../src/index.js";
import { HttpRedisStore, type HttpRedisStoreOptions } from "../src/stores/redis-http/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { storeContract } from "./contract.js";

let seq = 0;
const ns = (tag: string) => `http-${process.pid}-${++seq}-${tag}`;
const SPEC: LimitSpec = { algorithm: "sliding-log", limit: 5, window: "1h" };

describeRedis("HttpRedisStore over @upstash/redis (REST) on a real Redis", () => {
  let redis: RedisHandle;
  let rest: RedisRestHandle;
  let tcp: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    rest = await startRedisRest(redis.port);
    tcp = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    tcp?.disconnect();
    await rest?.close();
    await redis?.stop();
  });

  /** A client as a user makes one; `retry: false` where a test makes the REST side fail. */
  const client = (retry = true) => new Upstash({ url: rest.url, token: rest.token, ...(retry ? {} : { retry: false }) });
  // A generous timeout: the machine running the tests may be very busy; the timeout test sets its own.
  const store = (o: Partial<HttpRedisStoreOptions> = {}) => new HttpRedisStore({ client: client(), timeoutMs: 60_000, ...o });

  describe("contract", () => {
    let s: HttpRedisStore | undefined;
    beforeAll(() => {
      // An injected clock's TTLs are logical: keep keys for the test's real duration.
      s = store({ failure: "throw", timeoutMs: 10_000, minTtlMs: 600_000 });
    });
    storeContract({ store: () => s as HttpRedisStore });
  });

  it("uses Redis's clock when none is injected, one script call per decision, and admits exactly the limit at once", async () => {
    const limiter = new RateLimiter({ ...SPEC, store: store(), namespace: ns("time") });
    const before = rest.commands.length;
    const ds = await Promise.all(Array.from({ length: 12 }, () => limiter.consume("k")));
    expect(ds.filter((d) => d.allowed)).toHaveLength(5);
    expect(ds.filter((d) => !d.allowed).every((d) => d.retryAfterMs > 0 && d.reason === "limit")).toBe(true);
    expect(rest.commands.slice(before).filter((c) => c === "evalsha" || c === "eval")).toHaveLength(12);
  });

  it("shares each key's state exactly with RedisStore (ioredis) on the same Redis and prefix", async () => {
    const namespace = ns("shared");
    const edge = new RateLimiter({ ...SPEC, store: store(), namespace });
    const node = new RateLimiter({ ...SPEC, store: new RedisStore({ client: tcp, timeoutMs: 60_000 }), namespace });
    const ds = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? edge : node).consume("user:1")));
    expect(ds.filter((d) => d.allowed)).toHaveLength(5);
    expect((await edge.peek("user:1")).remaining).toBe(0);
    await node.reset("user:1");
    expect((await edge.consume("user:1")).remaining).toBe(4);
  });

  // A reset of a policy that can lease raises the key's reset epoch as RedisStore's does (quota
  // leasing reads it; docs/leasing.md), on a key the call declares (KEYS after the state keys).
  it("a reset raises the key's reset epoch, as RedisStore's does", async () => {
    const namespace = ns("epoch");
    const spec = { algorithm: "fixed-window", limit: 5, window: "1h", namespace } as const;
    const edge = new RateLimiter({ ...spec, store: store() });
    const node = new RateLimiter({ ...spec, store: new RedisStore({ client: tcp, timeoutMs: 60_000 }) });
    const epoch = `rk:{${namespace}:k}:e`;
    await node.reset("k");
    const first = Number(await tcp.get(epoch));
    expect(first).toBeGreaterThan(0);
    await edge.reset("k");
    expect(Number(await tcp.get(epoch))).toBeGreaterThan(first);
  });

  it("falls back to EVAL when the server has not got the script (SCRIPT FLUSH, a restart, a failover)", async () => {
    const limiter = new RateLimiter({ ...SPEC, store: store(), namespace: ns("flush") });
    expect((await limiter.consume("k")).remaining).toBe(4);
    await tcp.script("FLUSH");
    const before = rest.commands.length;
    expect((await limiter.consume("k")).remaining).toBe(3);
    expect(rest.commands.slice(before)).toEqual(["evalsha", "eval"]);
    expect((await limiter.consume("k")).remaining).toBe(2);
  });

  describe("failure policies (errors and silence)", () => {
    /** A limiter whose REST calls fail (status 500) while `fn` runs. */
    async function whileFailing<T>(o: Partial<HttpRedisStoreOptions>, fn: (l: RateLimiter) => Promise<T>): Promise<T> {
      const limiter = new RateLimiter({ ...SPEC, store: new HttpRedisStore({ client: client(false), ...o }), namespace: ns("fail") });
      rest.fail(true);
      try {
        return await fn(limiter);
      } finally {
        rest.fail(false);
      }
    }

    it("the default keeps limiting: each isolate decides at the full limit with a bounded local store (reason insurance)", async () => {
      const errors: unknown[] = [];
      const ds = await whileFailing({ onError: (e) => errors.push(e) }, async (l) => {
        const out = [];
        for (let i = 0; i < 6; i++) out.push(await l.consume("k"));
        return out;
      });
      // "open" was the default: every request admitted for as long as Redis was away.
      expect(ds.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
      expect(ds.every((d) => d.reason === "insurance")).toBe(true);
      expect(errors[0]).toBeInstanceOf(RateLimitStoreError);
    });

    it('"open" admits with reason store-error, and reports the failure', async () => {
      const errors: unknown[] = [];
      const d = await whileFailing({ failure: "open", onError: (e) => errors.push(e) }, (l) => l.consume("k"));
      expect([d.allowed, d.reason]).toEqual([true, "store-error"]);
      expect(errors[0]).toBeInstanceOf(RateLimitStoreError);
    });

    it('"closed" denies with retryAfterMs 1000', async () => {
      const d = await whileFailing({ failure: "closed" }, (l) => l.consume("k"));
      expect([d.allowed, d.reason, d.retryAfterMs]).toEqual([false, "store-error", 1000]);
    });

    it('"throw" rejects with a RateLimitStoreError carrying the cause', async () => {
      const e = await whileFailing({ failure: "throw" }, (l) => l.consume("k").catch((err: unknown) => err));
      expect(e).toBeInstanceOf(RateLimitStoreError);
      expect((e as Error).cause).toBeDefined();
    });

    it("{ insurance } decides with the local store at the full limit (reason insurance)", async () => {
      const ds = await whileFailing({ failure: { insurance: new MemoryStore() } }, async (l) => {
        const out = [];
        for (let i = 0; i < 6; i++) out.push(await l.consume("k"));
        return out;
      });
      expect(ds.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
      expect(ds.every((d) => d.reason === "insurance")).toBe(true);
    });

    it("a reply later than timeoutMs: the policy answers, and an admission it made in Redis is given back", async () => {
      const errors: { timedOut: boolean }[] = [];
      const namespace = ns("late");
      const s = new HttpRedisStore({ client: client(), timeoutMs: 200, failure: "open", onError: (_e, ctx) => errors.push(ctx) });
      const limiter = new RateLimiter({ ...SPEC, store: s, namespace });
      const check = new RateLimiter({ ...SPEC, store: store(), namespace });
      await check.consume("k"); // the script is loaded; 4 left
      rest.pause();
      let d;
      try {
        d = await limiter.consume("k");
      } finally {
        rest.resume();
      }
      expect([d.allowed, d.reason]).toEqual([true, "store-error"]);
      expect(errors).toEqual([{ op: "consume", key: "k", timedOut: true }]);
      // The held consume reached Redis and admitted; the store refunds it when its reply arrives. (A
      // peek reports what would remain after a cost-1 request: 3 once the key is back to 4 left.)
      await until(async () => (await check.peek("k")).remaining === 3, "the late admission to be given back", 400, 25);
    });
  });

  describe("options", () => {
    it("names each bad option and what to do", () => {
      const bad = (o: unknown) => () => new HttpRedisStore(o as HttpRedisStoreOptions);
      expect(bad({ client: tcp })).toThrow(/client: is an ioredis or node-redis client.*use RedisStore from ratekeeper\/redis/);
      expect(bad({ client: {} })).toThrow(/client: must be an @upstash\/redis Redis/);
      expect(bad({ client: client(), failure: "degraded" })).toThrow(/failure: "degraded" needs a count of instances/);
      expect(bad({ client: client(), timeoutMs: -1 })).toThrow(/timeoutMs: must be a whole number/);
      expect(bad({ client: client(), prefix: "a{b" })).toThrow(/prefix:/);
      expect(bad({ client: client(), batch: true })).toThrow(/batch: unknown option/);
      expect(bad({ client: client() })).not.toThrow();
      expect(bad({ client: tcp })).toThrow(RateLimitConfigError);
    });

    it("refuses quota leasing, which needs a process that outlives requests", () => {
      const gcra: LimitSpec = { algorithm: "gcra", limit: 100, window: "1s" };
      expect(() => new RateLimiter({ ...gcra, store: store(), lease: true })).toThrow(/lease: is not available with HttpRedisStore/);
    });
  });
});
