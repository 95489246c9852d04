/**
 * Quota leasing at its edges (stores/leased-table.ts over scripts/lease.lua, or over the
 * in-memory reference source with a manual clock):
 * - a refund puts back into the live block only what that block spent; the rest is Redis's to
 *   refund, so refunds never let through more than the same refunds would without leasing;
 * - RedisStore.close() gives back the units of blocks that were still on their way when it was called;
 * - a bucket's block lives `blockMs` counted from before its take was sent, not from when the reply
 *   arrived (docs/leasing.md): a reply held back by a busy event loop must not stretch the bound; a
 *   fixed window's, cut at its window's end from the send, still serves a late reply's waiters;
 * - Redis killed mid-block with failure "throw": every decision settles, nothing goes unhandled;
 * - the rest as each test says (maxKeys, maxPending, remaining, peek, option values, the memory store).
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { MemoryStore, RateLimiter, RateLimitConfigError, resolveLimit, type BoundStore, type Decision } from "../src/index.js";
import type { BlockOutcome } from "../src/core/lease-block.js";
import { LeasedTable, type BlockSource } from "../src/stores/leased-table.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { MemoryBlockSource, SharedState, UNUSED } from "./lease-source-model.js";

let seq = 0;
const uniq = (tag: string) => `${tag}${process.pid}-${++seq}`;

describeRedis("quota leasing at its edges, on Redis", () => {
  const fx = redisStoreFixture();
  /** A store on the fixture's server; every test closes its own (close gives back its blocks). */
  const newStore = () => new RedisStore({ client: fx.client, failure: "throw", timeoutMs: 10_000 });

  // Refunds of units admitted before (in an earlier window, or from a block given back) added
  // themselves to the live block without bound: a stream of refunds was an unlimited allowance.
  it.each([
    { algorithm: "fixed-window", limit: 10, window: "1h" },
    { algorithm: "token-bucket", limit: 10, window: "1h" },
    { algorithm: "gcra", limit: 10, window: "1h", burst: 9 },
  ] as const)("refunds beyond what the block spent do not grow it ($algorithm)", async (policy) => {
    const store = newStore();
    const spec = { ...policy, namespace: uniq("refund"), store };
    const results: number[] = [];
    for (const lease of [true, false]) {
      const limiter = new RateLimiter({ ...spec, namespace: `${spec.namespace}-${lease}`, lease });
      expect((await limiter.consume("k")).allowed).toBe(true);
      for (let i = 0; i < 5; i++) await limiter.refund("k", 10);
      let admitted = 0;
      for (let i = 0; i < 30; i++) if ((await limiter.consume("k")).allowed) admitted++;
      results.push(admitted);
    }
    expect(results, "admitted after the refunds: leased, then the same without leasing").toEqual([10, 10]);
    await store.close();
  });

  it("a refund of what the block spent goes back into it, with no store call", async () => {
    const store = newStore();
    const spec = { algorithm: "fixed-window", limit: 100, window: "1h", namespace: uniq("refund-own"), store } as const;
    const leased = new RateLimiter({ ...spec, lease: true });
    const plain = new RateLimiter(spec);
    await leased.consume("k");
    await Promise.all(Array.from({ length: 10 }, () => leased.consume("k"))); // a bigger block
    const before = (await plain.peek("k")).remaining;
    for (let i = 0; i < 11; i++) await leased.refund("k");
    expect((await plain.peek("k")).remaining, "Redis untouched: the refunds went into the block").toBe(before);
    await store.close();
    // A peek's remaining is what is left after a cost-1 request: 99 of a full allowance.
    expect((await plain.peek("k")).remaining, "all 11 given back with the block").toBe(99);
  });

  // A leased decision said only what its own block had left: the last unit of a block was
  // admitted with remaining 0 (a RateLimit-Remaining: 0 header, telling clients to wait for the
  // reset) while Redis still held most of the allowance.
  it.each([
    { algorithm: "fixed-window", limit: 100, window: "1h" },
    { algorithm: "token-bucket", limit: 100, window: "1h" },
    { algorithm: "gcra", limit: 100, window: "1h", burst: 99 },
  ] as const)("remaining counts what Redis had left as well as the block ($algorithm)", async (policy) => {
    const store = newStore();
    const spec = { ...policy, namespace: uniq("remaining"), store };
    const leased = new RateLimiter({ ...spec, lease: true });
    const plain = new RateLimiter({ ...spec, namespace: `${spec.namespace}-plain` });
    // One process alone on the key: the same answers as without leasing.
    for (let i = 0; i < 3; i++) {
      const [a, b] = [await leased.consume("k"), await plain.consume("k")];
      expect(a.remaining, `decision ${i}`).toBe(b.remaining);
    }
    const burst = await Promise.all(Array.from({ length: 10 }, () => leased.consume("k")));
    expect(Math.min(...burst.map((d) => d.remaining))).toBeGreaterThanOrEqual(100 - 3 - 10);
    await store.close();
  });

  // A peek asked Redis, which counts every block as spent: with the allowance out in blocks, a
  // peek said denied while a consume in the same process was admitted from its block.
  it("a peek answers as a consume would: from the live block when it holds the cost", async () => {
    const stores = [0, 1].map(() => newStore());
    const spec = { algorithm: "fixed-window", limit: 10, window: "1h", namespace: uniq("peek"), lease: true } as const;
    const [a, b] = stores.map((store) => new RateLimiter({ ...spec, store })) as [RateLimiter, RateLimiter];
    await a.consume("k");
    await Promise.all(Array.from({ length: 2 }, () => a.consume("k"))); // a bigger block: units left in it
    // The other process takes the rest of the window's allowance.
    while ((await b.consume("k")).allowed);
    const peeked = await a.peek("k");
    const consumed = await a.consume("k");
    expect(consumed.allowed, "a consume is served from the block").toBe(true);
    expect(peeked.allowed, "the peek says the same").toBe(true);
    expect(peeked.remaining).toBe(consumed.remaining);
    await Promise.all(stores.map((s) => s.close()));
  });

  // close() gave back the blocks held when it was called; a take still on its way landed after,
  // and its units stayed taken (until the window ended) in a process about to exit.
  it("RedisStore.close() gives back the units of a take that was on its way", async () => {
    const store = newStore();
    const spec = { algorithm: "fixed-window", limit: 100, window: "1h", namespace: uniq("close"), store } as const;
    const leased = new RateLimiter({ ...spec, lease: true });
    const plain = new RateLimiter(spec);
    const decisions = Promise.all(Array.from({ length: 5 }, () => leased.consume("k")));
    await store.close();
    // A peek's remaining is what is left after a cost-1 request.
    expect((await plain.peek("k")).remaining, "only the 5 decisions' units still taken").toBe(94);
    expect((await decisions).every((d) => d.allowed)).toBe(true);
  });
});

/** A source whose replies wait until the test lets them go (a slow network, a busy event loop). */
class HeldSource implements BlockSource {
  readonly held: Array<() => void> = [];
  /** @param clock the shared state's own time (a Redis server's), when the table sends none */
  constructor(
    private readonly inner: MemoryBlockSource,
    private readonly clock: () => number,
  ) {}
  async take(key: string, want: number, nowMs: number | undefined): Promise<BlockOutcome> {
    const b = await this.inner.take(key, want, nowMs ?? this.clock());
    await new Promise<void>((resolve) => this.held.push(resolve));
    return b;
  }
  /** Lets the oldest reply go, once its take has reached the source. */
  async letGo(): Promise<void> {
    for (let i = 0; i < 50 && this.held.length === 0; i++) await Promise.resolve();
    const next = this.held.shift();
    if (next === undefined) throw new Error("no take reached the source");
    next();
  }
  enter(): boolean {
    return true;
  }
  leave(): void {}
  give(key: string, units: number, blockStart: number, epoch: number, nowMs: number | undefined): Promise<void> {
    return this.inner.give(key, units, blockStart, epoch, nowMs ?? this.clock());
  }
}

describe("quota leasing: a block's life", () => {
  it("of a bucket is counted from before the take was sent, not from the reply (a reply held back 500 ms, blockMs 100)", async () => {
    const lim = resolveLimit({ algorithm: "token-bucket", limit: 1000, window: "1s" });
    let now = 1_000_000;
    const shared = new SharedState(lim);
    const source = new HeldSource(new MemoryBlockSource(shared, "i0", 400), () => now);
    // The per-decision path (a slow block's waiters go there): a denial.
    const inner = perDecisionStub(1000);
    const table = new LeasedTable(lim, source, inner, { blockMs: 100, maxKeys: 10 }, () => now);
    // Warm up: a first small block, spent, so the next take asks for a bigger one.
    const first = Promise.resolve(table.consume("k", 1, undefined));
    await source.letGo();
    expect((await first).allowed).toBe(true);
    now += 1;
    const waiting = Array.from({ length: 20 }, () => Promise.resolve(table.consume("k", 1, undefined)));
    now += 500; // the reply comes back 500 ms after the take was sent
    await source.letGo();
    await Promise.all(waiting);
    // Whatever the waiting decisions got, a decision now (501 ms after the send) must not be
    // served from that block: its life (100 ms from the send) is over.
    const late = table.consume("k", 1, undefined);
    const fromBlock = !(late instanceof Promise) && late.allowed;
    expect(fromBlock, "a decision 501 ms after the send was served from a 100 ms block").toBe(false);
    if (late instanceof Promise) {
      await source.letGo();
      await late;
    }
  });

  // A fixed window's bound is its window's end (counted from the send); blockMs only limits how
  // long units may sit unused there. A late reply (a busy event loop) still serves its waiters
  // from the block: sending them to Redis one by one would load Redis most when the process
  // is most loaded, for no gain in the bound.
  it("of a fixed window is counted from the reply (the window's end, from the send, keeps it exact)", async () => {
    const lim = resolveLimit({ algorithm: "fixed-window", limit: 1000, window: "10s" });
    let now = 1_000_000;
    const source = new HeldSource(new MemoryBlockSource(new SharedState(lim), "i0", 400), () => now);
    const inner = perDecisionStub();
    const table = new LeasedTable(lim, source, inner, { blockMs: 100, maxKeys: 10 }, () => now);
    const first = Promise.resolve(table.consume("k", 1, undefined));
    await source.letGo();
    expect((await first).allowed).toBe(true);
    now += 1;
    const waiting = Array.from({ length: 20 }, () => Promise.resolve(table.consume("k", 1, undefined)));
    now += 500; // the reply comes back 500 ms after the take was sent, well within the window
    await source.letGo();
    expect((await Promise.all(waiting)).every((d) => d.allowed)).toBe(true);
    expect(inner.decisions, "none sent to Redis one by one").toBe(0);
  });
});

describeRedis("quota leasing: Redis gone mid-block, failure 'throw'", () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  // Decisions waiting for a take are decisions waiting for Redis: maxPending bounds them as it
  // bounds per-decision calls. They were not counted: with Redis frozen (no timeout), the waiters
  // of a hot key, and takes of distinct keys, piled up without bound.
  it("decisions waiting for a take count toward maxPending; past it they are answered 'overloaded' at once", async () => {
    const client = new Redis(redis.port, redis.host);
    const store = new RedisStore({ client, failure: "throw", timeoutMs: 0, maxPending: 50 });
    const limiter = new RateLimiter({
      algorithm: "token-bucket",
      limit: 1000,
      window: "1s",
      store,
      lease: true,
      namespace: uniq("pending"),
    });
    await limiter.consume("warm"); // connected, scripts loaded
    redis.pause();
    try {
      const all = [
        ...Array.from({ length: 300 }, () => limiter.consume("hot")),
        ...Array.from({ length: 300 }, (_, i) => limiter.consume(`cold${i}`)),
      ];
      let overloaded = 0;
      const settled = Promise.allSettled(all.map((p) => p.then((d) => (overloaded += d.reason === "overloaded" ? 1 : 0))));
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(store.stats().pending, "waiting for Redis").toBeLessThanOrEqual(50);
      expect(overloaded).toBeGreaterThanOrEqual(550);
      redis.resume();
      await settled; // the 50 that waited are answered by Redis
    } finally {
      redis.resume();
    }
    await store.close();
    client.disconnect();
  });

  // The decisions waiting for a take that failed go to the per-decision path, whose "throw"
  // policy rejects: each decision must settle, and no rejection may go unhandled (which ends a
  // node process), whether a block was held when Redis went or not.
  it("every decision rejects with the store error; none hangs, nothing is left unhandled", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    const client = new Redis(redis.port, redis.host, { maxRetriesPerRequest: 0 });
    client.on("error", () => undefined);
    try {
      // One store that held a block when Redis went, one made after: each limiter's first take fails.
      const before = new RedisStore({ client, failure: "throw", timeoutMs: 200 });
      const held = new RateLimiter({
        algorithm: "fixed-window",
        limit: 100,
        window: "1s",
        store: before,
        lease: { blockMs: 20 },
        namespace: uniq("throw"),
      });
      await Promise.all(Array.from({ length: 20 }, () => held.consume("k"))); // a block held
      await redis.kill9();
      const after = new RedisStore({ client, failure: "throw", timeoutMs: 200 });
      const cold = new RateLimiter({
        algorithm: "token-bucket",
        limit: 100,
        window: "1s",
        store: after,
        lease: true,
        namespace: uniq("throw"),
      });
      let rejected = 0;
      const until = Date.now() + 600; // past the block's life and into the open breaker
      while (Date.now() < until) {
        const all = [held, cold].flatMap((l) => Array.from({ length: 5 }, () => l.consume("k")));
        const outcome = await Promise.race([
          Promise.allSettled(all),
          new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 2_000)),
        ]);
        expect(outcome, "decisions settle").not.toBe("hung");
        for (const r of outcome as PromiseSettledResult<unknown>[]) if (r.status === "rejected") rejected++;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(rejected).toBeGreaterThan(0);
      await Promise.all([before.close(), after.close()]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      client.disconnect();
    }
  });
});

/** The per-decision path, standing in: counts the decisions sent to it, and denies them (a limit of `limit`). */
function perDecisionStub(limit = 10): BoundStore & { decisions: number } {
  const stub = {
    decisions: 0,
    consume: (): Decision => {
      stub.decisions++;
      return {
        allowed: false,
        limit,
        remaining: 0,
        retryAfterMs: 1,
        resetAfterMs: 1,
        delayMs: 0,
        policy: 0,
        policyName: "",
        windowMs: 1000,
      } as Decision;
    },
    peek: () => {
      throw new Error("not expected");
    },
    refund: () => undefined,
    reset: () => undefined,
  };
  return stub;
}

describe("quota leasing: maxKeys while the store is slow", () => {
  // Eviction skips a key whose take is on its way; with every key held busy by a slow store, a
  // flood of distinct keys opened a lease each, past maxKeys, as long as the store stayed slow.
  it("never holds more than maxKeys keys: a key with no room is decided per decision", () => {
    const lim = resolveLimit({ algorithm: "fixed-window", limit: 10, window: "1s" });
    const now = 1_000_000;
    const source = new HeldSource(new MemoryBlockSource(new SharedState(lim), "i0", 400), () => now);
    const inner = perDecisionStub();
    const table = new LeasedTable(lim, source, inner, { blockMs: 100, maxKeys: 100 }, () => now);
    for (let i = 0; i < 1000; i++) void table.consume(`k${i}`, 1, undefined); // every take held back
    expect(table.size).toBeLessThanOrEqual(100);
    expect(inner.decisions).toBe(900);
  });
});

describe("quota leasing: which key makes room (maxKeys)", () => {
  /** Store calls (takes and give-backs) for `hot`, deciding it among a stream of keys seen once. */
  const hotCalls = async (maxKeys: number): Promise<number> => {
    const lim = resolveLimit({ algorithm: "fixed-window", limit: 1_000_000, window: "1h" });
    const inner = new MemoryBlockSource(new SharedState(lim), "i0", 400);
    let calls = 0;
    const source: BlockSource = {
      take: (key, want, nowMs) => ((calls += key === "hot" ? 1 : 0), inner.take(key, want, nowMs)),
      give: (key, units, blockStart, epoch, nowMs) => ((calls += key === "hot" ? 1 : 0), inner.give(key, units, blockStart, epoch, nowMs)),
      enter: () => true,
      leave: () => undefined,
    };
    const table = new LeasedTable(lim, source, UNUSED, { blockMs: 100, maxKeys }, () => 0);
    let now = 3_600_000 * 100;
    for (let i = 0; i < 2000; i++) {
      now += 1;
      // The hot key: 10 decisions a ms; a key seen once, every ms (an IP, a user).
      expect(
        (await Promise.all(Array.from({ length: 10 }, () => Promise.resolve(table.consume("hot", 1, now))))).every((d) => d.allowed),
      ).toBe(true);
      await table.consume(`once${i}`, 1, now);
    }
    return calls;
  };

  // Room was made by dropping the first idle key in the order keys were opened: the hot key,
  // opened first and idle between its takes, was dropped (its block given back) whenever the
  // table was full, then opened again cold (a first take sized for what waits): a stream of keys
  // seen once cost the hot key a give-back and extra takes every maxKeys of them. A key whose
  // block is spent or over goes first; and a take makes its key the newest.
  it("a stream of keys seen once does not push out the hot key: its store calls are those of a table with room", async () => {
    const roomy = await hotCalls(100_000);
    expect(await hotCalls(8)).toBe(roomy);
  });
});

describe("the lease option, hostile values", () => {
  const issues = (lease: unknown): string => {
    try {
      new RateLimiter({ algorithm: "token-bucket", limit: 10, window: "1s", lease } as never);
    } catch (e) {
      return (e as RateLimitConfigError).issues.map((i) => `${i.path}: ${i.message}`).join("\n");
    }
    return "";
  };

  // maxKeys: null was taken as the default (10,000) where every other option refuses null.
  it("null is refused naming the field, as every other option refuses it", () => {
    expect(issues({ maxKeys: null })).toMatch(/^lease\.maxKeys: must be a whole number >= 1 \(got null\)$/);
    expect(issues({ blockMs: null })).toMatch(/^lease\.blockMs: .*\(got null\)$/);
  });

  // A Map (or a Set, a Date, any class instance) was read as {}: its entries are not properties,
  // so new Map([["blockMs", 5]]) leased with the default blockMs, silently.
  it("a Map, or another object that is not a plain one, is refused naming the field and what it got", () => {
    expect(issues(new Map())).toBe("lease: must be true, false or { blockMs, maxKeys } (got a Map)");
    expect(issues(new Map([["blockMs", 5]]))).toBe("lease: must be true, false or { blockMs, maxKeys } (got a Map)");
    expect(issues(new Set())).toMatch(/^lease: .*\(got a Set\)$/);
    expect(issues(new Date(0))).toMatch(/^lease: .*\(got a Date\)$/);
    expect(issues(new (class Options {})())).toMatch(/^lease: .*\(got a Options\)$/);
    // Plain objects, with or without a prototype (as some parsers make them), are options.
    expect(issues(Object.assign(Object.create(null) as object, { blockMs: 5 }))).toBe("");
    expect(issues({ blockMs: 5 })).toBe("");
  });

  it("blockMs and maxKeys that are not positive whole numbers are refused naming the field", () => {
    for (const blockMs of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, 1.5, 2 ** 53, "1.5s", "soon", true]) {
      expect(issues({ blockMs }), String(blockMs)).toMatch(/^lease\.blockMs: must be a positive duration/);
    }
    for (const maxKeys of [0, -1, 1.5, "10", Number.POSITIVE_INFINITY, 2 ** 60]) {
      expect(issues({ maxKeys }), String(maxKeys)).toMatch(/^lease\.maxKeys: must be a whole number >= 1/);
    }
    // Past what a timer holds is accepted: the sweep's interval is capped (lease-sweep-timer.test.ts).
    expect(issues({ blockMs: 2 ** 31, maxKeys: 1 })).toBe("");
  });
});

describe("quota leasing on the memory store", () => {
  it("is ignored: the same decisions as without it (the store is local already)", async () => {
    const clock = () => 1_000_000;
    for (const policy of [
      { algorithm: "fixed-window", limit: 3, window: "1h" },
      { algorithm: "gcra", limit: 3, window: "1h", burst: 1 },
    ] as const) {
      const leased = new RateLimiter({ ...policy, store: new MemoryStore(), clock, lease: true });
      const plain = new RateLimiter({ ...policy, store: new MemoryStore(), clock });
      for (let i = 0; i < 5; i++) expect(await leased.consume("k"), `${policy.algorithm} ${i}`).toEqual(await plain.consume("k"));
      await leased.refund("k");
      await plain.refund("k");
      expect(await leased.peek("k")).toEqual(await plain.peek("k"));
    }
  });
});
