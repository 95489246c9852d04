/**
 * The counter layout of a clock-aligned fixed window in Redis (stores/redis/counter.ts): one
 * integer per key, tag * SPAN + count, so that a decision in a window the key already counts is
 * EVALSHA + one INCRBY. What is checked here, beside the differential tests that compare every
 * decision with the memory store:
 * - the Redis work: 2 commands per decision on a counted window, 3 for a window's first decision;
 * - denials add to the stored count and are taken back (DECRBY) only when a smaller request could
 *   still fit; a flood of denials is folded back long before the count could reach SPAN;
 * - a key of a window that is over reads as fresh; TTL = the window's end + minTtlMs;
 * - a layout that does not fit (huge minTtlMs for a tiny window) keeps the packed pair.
 */
import { expect, it } from "vitest";
import { commandDelta } from "../../../test-support/redis-commands.js";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { MemoryStore, RateLimiter, type LimitSpec } from "../src/index.js";
import { COUNTER_SPAN, COUNTER_TAGS } from "../src/stores/redis/counter.js";
import { RedisStore, type RedisStoreOptions } from "../src/stores/redis/index.js";

let seq = 0;
const ns = () => `ctr${process.pid}-${++seq}`;
const T0 = 1_800_000_000_000;
// The window's number mod TAGS, floored (as counter.ts and the script compute it: tags are 1..TAGS, before 1970 too).
const tagOf = (nowMs: number, windowMs: number) => (((Math.floor(nowMs / windowMs) % COUNTER_TAGS) + COUNTER_TAGS) % COUNTER_TAGS) + 1;

describeRedis("RedisStore: the fixed window's counter layout", () => {
  const fx = redisStoreFixture();

  /**
   * A Redis limiter and a memory limiter on one injected clock. Its stores have a fixed instance
   * count (`instances: 1`), so no instance-registry heartbeat (every 5 s per store) is counted by
   * the tests that count a decision's commands (see redis-store.test.ts).
   */
  const pair = (spec: LimitSpec, opts: Partial<RedisStoreOptions> = {}) => {
    const clock = { now: T0 };
    const namespace = ns();
    const red = new RateLimiter({
      ...spec,
      store: new RedisStore({ client: fx.client, failure: "throw", timeoutMs: 10_000, instances: 1, batch: false, ...opts }),
      namespace,
      clock: () => clock.now,
    });
    const mem = new RateLimiter({ ...spec, store: new MemoryStore(), namespace, clock: () => clock.now });
    return { clock, red, mem, key: (k: string) => `rk:{${namespace}:${k}}` };
  };

  it("a decision in a window the key counts is EVALSHA + INCRBY; the window's first also SETs", async () => {
    const { red, key } = pair({ algorithm: "fixed-window", limit: 1000, window: 60_000 });
    await red.consume("warm"); // the store's first call registers it and reads Redis's clock
    const first = await commandDelta(fx.admin, () => red.consume("hot"));
    expect(first).toEqual({ evalsha: 1, incrby: 1, set: 1 });
    const rest = await commandDelta(fx.admin, async () => {
      for (let i = 0; i < 50; i++) await red.consume("hot");
    });
    expect(rest).toEqual({ evalsha: 50, incrby: 50 });
    expect(Number(await fx.admin.get(key("hot")))).toBe(tagOf(T0, 60_000) * COUNTER_SPAN + 51);
  });

  it("denials count on, are taken back only when a smaller request could fit, and decide as the memory store", async () => {
    const { clock, red, mem, key } = pair({ algorithm: "fixed-window", limit: 10, window: 60_000 });
    const both = async (cost: number) => {
      const [r, m] = await Promise.all([red.consume("k", cost), mem.consume("k", cost)]);
      expect(r).toEqual(m);
      return r;
    };
    expect((await both(8)).allowed).toBe(true);
    // 8 + 5 > 10 but 2 more would fit: this denial is taken back (DECRBY).
    const partial = await commandDelta(fx.admin, () => both(5));
    expect(partial).toEqual({ evalsha: 1, incrby: 1, decrby: 1 });
    expect((await both(2)).remaining).toBe(0);
    // The window is full: denials only add (no DECRBY), and say remaining 0.
    const flood = await commandDelta(fx.admin, async () => {
      for (let i = 0; i < 20; i++) expect((await both(1)).remaining).toBe(0);
    });
    expect(flood).toEqual({ evalsha: 20, incrby: 20 });
    expect(Number(await fx.admin.get(key("k"))) % COUNTER_SPAN).toBe(30);
    // A refund gives back from what the window admitted (10), not from the stored 30.
    await Promise.all([red.refund("k", 3), mem.refund("k", 3)]);
    expect((await both(3)).allowed).toBe(true);
    expect((await both(1)).allowed).toBe(false);
    // The next window starts afresh.
    clock.now += 60_000;
    expect((await both(10)).allowed).toBe(true);
  });

  it("a count grown to SPAN / 2 by denials is folded back to the limit", async () => {
    const { red, key } = pair({ algorithm: "fixed-window", limit: 5, window: 60_000 });
    await red.consume("f");
    const tag = tagOf(T0, 60_000);
    await fx.admin.set(key("f"), String(tag * COUNTER_SPAN + COUNTER_SPAN / 2 - 1), "KEEPTTL");
    const d = await red.consume("f");
    expect(d.allowed).toBe(false);
    expect(d.remaining).toBe(0);
    expect(Number(await fx.admin.get(key("f")))).toBe(tag * COUNTER_SPAN + 5);
    expect(await fx.admin.pttl(key("f"))).toBeGreaterThan(60_000);
  });

  it("a key of a window that is over reads as fresh; the TTL is the window's end + minTtlMs", async () => {
    const { clock, red, mem, key } = pair({ algorithm: "fixed-window", limit: 4, window: 1_000 }, { minTtlMs: 5_000 });
    clock.now = T0 + 250;
    const old = tagOf(T0 - 3_000, 1_000);
    await fx.admin.set(key("s"), String(old * COUNTER_SPAN + 4), "PX", 60_000);
    const [r, m] = await Promise.all([red.consume("s"), mem.consume("s")]);
    expect(r).toEqual(m);
    expect(r.remaining).toBe(3);
    const ttl = await fx.admin.pttl(key("s"));
    expect(ttl).toBeGreaterThan(5_000);
    expect(ttl).toBeLessThanOrEqual(750 + 5_000);
  });

  it("times before 1970 (an injected clock): a fresh key's window starts at 0 at the earliest, as in the memory store", async () => {
    // fixed-window.ts counts a fresh state's window from max(clock window, 0); a key of a window
    // that is over counts in the clock's window. Found by the differential test (t0 = 0, steps back).
    for (const [batch, W] of [
      [false, 100],
      [true, 1000],
    ] as const) {
      const { clock, red, mem, key } = pair({ algorithm: "fixed-window", limit: 1, window: W }, { batch });
      for (const [op, t] of [
        ["peek", -1],
        ["consume", -2],
        ["peek", -3],
        ["consume", -2],
      ] as const) {
        clock.now = t;
        expect(await red[op]("neg"), `${op} at ${t}, batch ${batch}`).toEqual(await mem[op]("neg"));
      }
      // A key of a window that is over, before 1970: the clock's window.
      clock.now = -5 * W + 1;
      await fx.admin.set(key("neg"), String(tagOf(-9 * W, W) * COUNTER_SPAN + 1), "PX", 60_000);
      expect((await red.consume("neg")).resetAfterMs).toBe(W - 1);
    }
  });

  it("the batched (general) path and the fast path share one key: exactly the limit", async () => {
    const spec: LimitSpec = { algorithm: "fixed-window", limit: 37, window: 60_000 };
    const namespace = ns();
    const batched = new RateLimiter({
      ...spec,
      namespace,
      store: new RedisStore({ client: fx.client, failure: "throw", timeoutMs: 10_000, instances: 1 }),
    });
    const lone = new RateLimiter({
      ...spec,
      namespace,
      store: new RedisStore({ client: fx.client, failure: "throw", timeoutMs: 10_000, instances: 1, batch: false }),
    });
    const all = await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? batched : lone).consume("shared")));
    expect(all.filter((d) => d.allowed)).toHaveLength(37);
    expect((await lone.peek("shared")).remaining).toBe(0);
    expect((await batched.peek("shared")).remaining).toBe(0);
  });

  it("a window too small for its tags under a long minTtlMs keeps the packed pair (12 bytes)", async () => {
    const { red, key } = pair({ algorithm: "fixed-window", limit: 3, window: 10 }, { minTtlMs: 600_000 });
    await red.consume("p");
    expect(await fx.admin.strlen(key("p"))).toBe(12);
    expect((await red.consume("p")).remaining).toBe(1);
  });

  it("MEMORY USAGE of a counted key is below the packed pair's", async () => {
    const { red, key } = pair({ algorithm: "fixed-window", limit: 100, window: 60_000 });
    const packed = pair({ algorithm: "fixed-window", limit: 100, window: 60_000, align: "first-request" });
    for (let i = 0; i < 3; i++) await Promise.all([red.consume("user:12345"), packed.red.consume("user:12345")]);
    const counted = Number(await fx.admin.memory("USAGE", key("user:12345")));
    const pairBytes = Number(await fx.admin.memory("USAGE", packed.key("user:12345")));
    expect(counted).toBeGreaterThan(0);
    expect(counted).toBeLessThan(pairBytes);
  });
});
