/**
 * The outage test: Redis is stopped in the middle of traffic and restarted on the same port.
 * Each failure policy behaves as documented (docs/redis.md), errors reach onError, nothing
 * crashes or leaks an unhandled rejection, and limiting resumes once Redis is back (with an empty
 * script cache: the EVAL fallback on NOSCRIPT). Also a Redis that hangs (CLIENT PAUSE): the call
 * times out after timeoutMs and the late reply is dropped.
 */
import { once } from "node:events";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from "vitest";
import { describeRedis, rawCommand, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { MemoryStore, RateLimiter, RateLimitStoreError, type Decision } from "../src/index.js";
import { RedisStore, type RedisClientLike, type RedisErrorContext, type RedisFailurePolicy } from "../src/stores/redis/index.js";

const HOUR = 3_600_000;

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describeRedis("outage: Redis stops mid-traffic and comes back", () => {
  let redis: RedisHandle;
  let unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  const clients: Array<() => Promise<unknown> | void> = [];

  beforeAll(async () => {
    redis = await startRedis();
    process.on("unhandledRejection", onUnhandled);
  });
  afterAll(async () => {
    process.off("unhandledRejection", onUnhandled);
    await redis?.stop();
  });
  beforeEach(async () => {
    unhandled = [];
    if (!(await rawCommand(redis.port, ["PING"]).catch(() => ""))) await redis.restart();
  });
  afterEach(async () => {
    for (const close of clients.splice(0)) await close();
    // Give late replies and reconnect timers a moment to surface any unhandled rejection.
    await new Promise((r) => setTimeout(r, 100));
    expect(unhandled).toEqual([]);
  });

  async function setup(failure: RedisFailurePolicy, client?: RedisClientLike) {
    let c = client;
    if (!c) {
      // Fail fast while disconnected (no offline queue), reconnect every 50 ms.
      const io = new Redis(redis.port, redis.host, { enableOfflineQueue: false, retryStrategy: () => 50, maxRetriesPerRequest: 0 });
      io.on("error", () => undefined); // connection errors are events; the store sees failed calls
      clients.push(() => io.disconnect());
      await once(io, "ready");
      c = io;
    }
    const errors: Array<{ err: RateLimitStoreError; ctx: RedisErrorContext }> = [];
    const store = new RedisStore({ client: c, failure, onError: (err, ctx) => errors.push({ err, ctx }) });
    const limiter = new RateLimiter({
      algorithm: "fixed-window",
      limit: 5,
      window: HOUR,
      align: "first-request",
      store,
      namespace: `out-${Math.random().toString(36).slice(2)}`,
    });
    return { limiter, errors };
  }

  async function consumeN(limiter: RateLimiter, key: string, n: number): Promise<Decision[]> {
    const out: Decision[] = [];
    for (let i = 0; i < n; i++) out.push(await limiter.consume(key));
    return out;
  }

  /** After restart: the first decision not made by the failure policy; then a full, exact allowance. */
  async function expectRecovery(limiter: RateLimiter): Promise<void> {
    await until("Redis to answer again", async () => {
      const d = await limiter.peek("probe");
      return d.reason === undefined ? d : undefined;
    });
    // Restarted empty: the key starts afresh, and the limit holds exactly again.
    const ds = await consumeN(limiter, "k", 6);
    expect(ds.map((d) => [d.allowed, d.reason])).toEqual([
      [true, undefined],
      [true, undefined],
      [true, undefined],
      [true, undefined],
      [true, undefined],
      [false, "limit"],
    ]);
  }

  it('failure "open": admits with reason "store-error" while Redis is down, then limits again', async () => {
    const { limiter, errors } = await setup("open");
    expect((await consumeN(limiter, "k", 5)).every((d) => d.allowed && d.reason === undefined)).toBe(true);
    await redis.stop();
    const during = await consumeN(limiter, "k", 8);
    expect(during.every((d) => d.allowed && d.reason === "store-error")).toBe(true);
    await limiter.refund("k"); // does not throw
    await limiter.reset("k");
    expect(errors.length).toBeGreaterThanOrEqual(10);
    expect(errors[0]?.err).toBeInstanceOf(RateLimitStoreError);
    expect(errors[0]?.err.cause).toBeDefined();
    expect(errors.map((e) => e.ctx.op)).toContain("refund");
    await redis.restart();
    await expectRecovery(limiter);
  });

  it('failure "closed": denies with reason "store-error" and retryAfterMs 1000, then limits again', async () => {
    const { limiter, errors } = await setup("closed");
    await consumeN(limiter, "k", 2);
    await redis.stop();
    const during = await consumeN(limiter, "k", 5);
    expect(during.every((d) => !d.allowed && d.reason === "store-error" && d.retryAfterMs === 1000)).toBe(true);
    expect(errors.length).toBe(5);
    await redis.restart();
    await expectRecovery(limiter);
  });

  it("insurance MemoryStore: keeps limiting locally (reason insurance), then Redis takes over again", async () => {
    const insurance = new MemoryStore({ sweepIntervalMs: 0 });
    const { limiter } = await setup({ insurance });
    await consumeN(limiter, "k", 2);
    await redis.stop();
    const during = await consumeN(limiter, "k", 7);
    expect(during.map((d) => [d.allowed, d.reason])).toEqual([
      ...Array.from({ length: 5 }, () => [true, "insurance"]),
      [false, "insurance"],
      [false, "insurance"],
    ]);
    await redis.restart();
    await expectRecovery(limiter);
  });

  it('failure "throw": rejects with RateLimitStoreError (cause attached), refund and reset too', async () => {
    const { limiter } = await setup("throw");
    await consumeN(limiter, "k", 1);
    await redis.stop();
    await expect(limiter.consume("k")).rejects.toBeInstanceOf(RateLimitStoreError);
    await expect(limiter.peek("k")).rejects.toThrow(/RedisStore peek "k"/);
    await expect(limiter.refund("k")).rejects.toBeInstanceOf(RateLimitStoreError);
    await expect(limiter.reset("k")).rejects.toBeInstanceOf(RateLimitStoreError);
    await redis.restart();
    await expectRecovery(limiter);
  });

  it("default client options (offline queue on): calls time out after timeoutMs, nothing crashes, recovery", async () => {
    const client = new Redis(redis.port, redis.host, { retryStrategy: () => 50 });
    client.on("error", () => undefined);
    clients.push(() => client.disconnect());
    await once(client, "ready");
    const { limiter, errors } = await setup("open", client);
    await consumeN(limiter, "k", 1);
    await redis.stop();
    const during = await consumeN(limiter, "k", 3);
    expect(during.every((d) => d.allowed && d.reason === "store-error")).toBe(true);
    expect(errors.every((e) => e.ctx.timedOut)).toBe(true);
    await redis.restart();
    await until("Redis to answer again", async () => ((await limiter.peek("probe")).reason === undefined ? true : undefined));
  });

  it("node-redis: the same failure handling and recovery", async () => {
    const client = createClient({ url: redis.url, disableOfflineQueue: true, socket: { reconnectStrategy: () => 50 } });
    client.on("error", () => undefined); // node-redis emits connection errors as events
    await client.connect();
    clients.push(() => client.destroy());
    const { limiter, errors } = await setup("closed", client);
    await consumeN(limiter, "k", 1);
    await redis.stop();
    const during = await consumeN(limiter, "k", 3);
    expect(during.every((d) => !d.allowed && d.reason === "store-error")).toBe(true);
    expect(errors.length).toBe(3);
    await redis.restart();
    await expectRecovery(limiter);
  });

  it("a hung Redis with 300 decisions in flight (batched): every one is answered by the policy, none lost", async () => {
    const { limiter, errors } = await setup("closed");
    await consumeN(limiter, "k", 1);
    await rawCommand(redis.port, ["CLIENT", "PAUSE", "2000", "ALL"]);
    const ds = await Promise.all(Array.from({ length: 300 }, (_, i) => limiter.consume(`k${i % 7}`)));
    expect(ds.every((d) => !d.allowed && d.reason === "store-error")).toBe(true);
    expect(errors).toHaveLength(300);
    expect(errors.every((e) => e.ctx.timedOut)).toBe(true);
    await until("Redis to answer again", async () => ((await limiter.peek("probe")).reason === undefined ? true : undefined));
  });

  it("a hung Redis (CLIENT PAUSE): the call gives up after timeoutMs; the late reply is dropped", async () => {
    const { limiter, errors } = await setup("closed");
    await consumeN(limiter, "k", 1);
    await rawCommand(redis.port, ["CLIENT", "PAUSE", "2000", "ALL"]);
    // Had it waited for the pause to end, Redis would have decided (reason undefined).
    const d = await limiter.consume("k");
    expect([d.allowed, d.reason]).toEqual([false, "store-error"]);
    expect(errors[0]?.ctx.timedOut).toBe(true);
    // After the pause the late reply arrives and is ignored; the store keeps working.
    await until("Redis to answer again", async () => ((await limiter.peek("probe")).reason === undefined ? true : undefined));
  });
});
