/**
 * The differential test that holds the Lua and the TypeScript together: the same random traffic
 * (times, keys, costs, consumes, peeks, refunds, resets; one to three limits of every algorithm
 * and option) through a MemoryStore and a RedisStore with the same injected clock must give
 * identical decisions, field for field.
 */
import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { Evaluator } from "../src/core/evaluate.js";
import {
  MemoryStore,
  RateLimiter,
  resolveLimits,
  type BoundStore,
  type Decision,
  type LimitSpec,
  type LimitState,
  type ResolvedLimit,
  type Store,
} from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { anySpecArb, slidingWindowArb, startArb } from "./arbitraries.js";

/**
 * The core algorithms with no expiry at all: what the Lua computes when its keys outlive the run.
 * The judge when the clock steps back, where MemoryStore's expiry (`exp = now + ttl`, which a
 * step back moves earlier) legitimately differs from keys that Redis keeps.
 */
class NoExpiryStore implements Store {
  bind(limits: readonly ResolvedLimit[]): BoundStore {
    const ev = new Evaluator(limits);
    const keys = new Map<string, LimitState[]>();
    return {
      consume: (key, cost, now, maxDelayMs): Decision => {
        // A Redis key exists once a consume was admitted (a denial writes nothing).
        const s = keys.get(key) ?? ev.init();
        const d = ev.run(s, now as number, cost, true, maxDelayMs);
        if (d.allowed) keys.set(key, s);
        return d;
      },
      // Like the stores: a peek creates nothing, a refund of a key never charged changes nothing.
      peek: (key, cost, now): Decision => ev.run(keys.get(key) ?? ev.init(), now as number, cost, false),
      refund: (key, cost, now) => {
        const s = keys.get(key);
        if (s) ev.refund(s, now as number, cost);
      },
      reset: (key) => void keys.delete(key),
    };
  }
}

/** Bigger logs and more sub-windows than the core arbitraries: ring wrap-around, the search hint. */
const wideSpecArb: fc.Arbitrary<LimitSpec> = fc.oneof(
  fc.record({
    algorithm: fc.constant("sliding-log" as const),
    limit: fc.integer({ min: 1, max: 40 }),
    window: fc.constantFrom(5, 50, 100, 1000),
  }),
  slidingWindowArb(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: 12 }), fc.constantFrom(1, 7, 50)),
  fc.record({
    algorithm: fc.constantFrom("token-bucket" as const, "gcra" as const),
    limit: fc.integer({ min: 1, max: 1000 }),
    window: fc.constantFrom(1000, 60_000, 86_400_000),
  }),
);

const specArb = fc.oneof({ weight: 3, arbitrary: anySpecArb }, { weight: 1, arbitrary: wideSpecArb });

interface Op {
  kind: "consume" | "peek" | "refund" | "reset";
  dt: number;
  key: number;
  cost: number;
  /** A consume's shaping bound (the caller's longest wait); undefined: none. */
  maxDelayMs?: number | undefined;
}

/** Mostly no bound; else bounds around the waits a shaping bucket of the arbitraries makes. */
const maxDelayArb = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constantFrom(0, 1, 50, 250, 1000) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 5000 }) },
);

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom("consume", "consume", "consume", "consume", "consume", "peek", "refund", "reset"),
  dt: fc.oneof(
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 4, arbitrary: fc.integer({ min: 0, max: 30 }) },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: 3000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 200_000 }) },
  ),
  key: fc.integer({ min: 0, max: 2 }),
  cost: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: 1000 }) }),
  maxDelayMs: maxDelayArb,
});

/**
 * The sliding log is the Lua with the most moving parts (ring slots, the search hint, refunds that
 * restore overwritten slots): small windows and small steps, so timestamps land exactly on the
 * window's edge and refunds follow commits that overwrote units.
 */
const logScenarioArb = fc.tuple(
  fc.record({
    algorithm: fc.constant("sliding-log" as const),
    limit: fc.integer({ min: 1, max: 12 }),
    window: fc.constantFrom(1, 2, 3, 5, 10),
  }),
  startArb,
  fc.array(
    fc.record({
      kind: fc.constantFrom<Op["kind"]>("consume", "consume", "consume", "peek", "refund"),
      // A few steps back: an injected clock may step back (NTP); both stores must still agree.
      dt: fc.constantFrom(0, 0, 1, 1, 2, 3, 5, 10, -1, -4),
      key: fc.constant(0),
      cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 12 })),
    }),
    { minLength: 1, maxLength: 80 },
  ),
);

/**
 * Logs of limits above 128, longer than the 16 slots the fast path reads with the header
 * (ratekeeper.lua kind "l"): read and written by ranges, the ring wrapping, the header's write
 * folded with the first slots', the rewrite when the ring becomes full; and young ones of at
 * most 16 slots, rewritten whole.
 */
const longLogScenarioArb = fc.tuple(
  fc.record({
    algorithm: fc.constant("sliding-log" as const),
    limit: fc.integer({ min: 129, max: 170 }),
    window: fc.constantFrom(10, 50, 100, 200),
  }),
  startArb,
  fc.array(
    fc.record({
      kind: fc.constantFrom<Op["kind"]>("consume", "consume", "consume", "consume", "peek", "refund"),
      dt: fc.constantFrom(0, 0, 1, 1, 2, 3, 5, 10, -1, -4),
      key: fc.constant(0),
      cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 40 })),
    }),
    { minLength: 1, maxLength: 150 },
  ),
);

/**
 * Logs whose traffic keeps far fewer units in a window than `limit`: the memory store's ring wraps
 * long before it has `limit` slots (the script's always has `limit`), grows when a burst fills the
 * window, and must still decide alike through idle gaps, refunds past the units it holds and a
 * clock that steps back (both decide as at the log's high-water mark).
 */
const wrapLogScenarioArb = fc.tuple(
  fc.record({
    algorithm: fc.constant("sliding-log" as const),
    limit: fc.oneof(fc.integer({ min: 9, max: 60 }), fc.integer({ min: 129, max: 300 })),
    window: fc.constantFrom(5, 20, 100),
  }),
  startArb,
  fc.array(
    fc.record({
      kind: fc.constantFrom<Op["kind"]>("consume", "consume", "consume", "consume", "peek", "refund"),
      dt: fc.constantFrom(0, 1, 2, 3, 5, 10, 30, 100, 700, -1, -4, -30),
      key: fc.constant(0),
      cost: fc.oneof(fc.constant(1), fc.constant(1), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 300 })),
    }),
    { minLength: 1, maxLength: 150 },
  ),
);

/** Sliding window counters near the epoch and across sub-windows, refunds heavy. */
const windowScenarioArb = fc.tuple(
  slidingWindowArb(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 5 }), fc.constantFrom(1, 2, 3, 10)),
  fc.oneof(fc.integer({ min: 0, max: 20 }), startArb),
  fc.array(
    fc.record({
      kind: fc.constantFrom<Op["kind"]>("consume", "consume", "peek", "refund", "refund"),
      dt: fc.constantFrom(0, 0, 1, 2, 3, 7, 10, 25, -2),
      key: fc.constant(0),
      cost: fc.integer({ min: 1, max: 8 }),
    }),
    { minLength: 1, maxLength: 80 },
  ),
);

const scenarioArb = fc.tuple(fc.array(specArb, { minLength: 1, maxLength: 3 }), startArb, fc.array(opArb, { minLength: 1, maxLength: 60 }));

describeRedis("RedisStore vs MemoryStore: identical decisions", () => {
  let redis: RedisHandle;
  let client: Redis;
  let store: RedisStore;
  let run = 0;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
    // The clock is injected and jumps ahead of real time: keep keys longer than the run.
    store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000, minTtlMs: 600_000 });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  async function replay(specs: LimitSpec[], t0: number, ops: Op[]): Promise<void> {
    const reference: Store = ops.some((o) => o.dt < 0) ? new NoExpiryStore() : new MemoryStore({ sweepIntervalMs: 0 });
    const limits = resolveLimits(specs);
    const maxCost = Math.min(...limits.map((l) => l.capacity));
    const clock = { now: t0 };
    const namespace = `diff-${++run}`;
    const mem = new RateLimiter({ limits: specs, store: reference, clock: () => clock.now, namespace });
    const red = new RateLimiter({ limits: specs, store, clock: () => clock.now, namespace });
    for (const [step, op] of ops.entries()) {
      clock.now += op.dt;
      const key = `k${op.key}`;
      const cost = 1 + ((op.cost - 1) % maxCost);
      const where = `step ${step} ${op.kind}(${key}, ${cost}) at t=${clock.now}`;
      switch (op.kind) {
        case "consume":
          expect(await red.consume(key, cost, op.maxDelayMs), `${where} maxDelayMs ${op.maxDelayMs}`).toEqual(
            await mem.consume(key, cost, op.maxDelayMs),
          );
          break;
        case "peek":
          expect(await red.peek(key, cost), where).toEqual(await mem.peek(key, cost));
          break;
        case "refund":
          await Promise.all([red.refund(key, cost), mem.refund(key, cost)]);
          break;
        case "reset":
          await Promise.all([red.reset(key), mem.reset(key)]);
          break;
      }
    }
    // Finally every key agrees for every cost (refunds and resets left the same state).
    for (let k = 0; k < 3; k++) {
      for (let cost = 1; cost <= Math.min(maxCost, 12); cost++) {
        expect(await red.peek(`k${k}`, cost), `final peek k${k} cost ${cost}`).toEqual(await mem.peek(`k${k}`, cost));
      }
    }
  }

  it("sliding log: ring, search hint and refunds at the window's edge", async () => {
    await fc.assert(
      fc.asyncProperty(logScenarioArb, ([spec, t0, ops]) => replay([spec], t0, ops)),
      { numRuns: 400 },
    );
  });

  it("sliding log, steady traffic over many windows: rings of 130 and 1000 wrap again and again", async () => {
    // The property runs above rarely wrap a long ring many times: deterministic traffic that does
    // (the fast path's ranged reads, and its header write folded with slots 1-16, every wrap).
    const ops: Op[] = Array.from({ length: 2000 }, (_, i) => ({
      kind: i % 37 === 36 ? "refund" : i % 11 === 10 ? "peek" : "consume",
      dt: i % 3,
      key: 0,
      cost: 1 + (i % 7),
    }));
    await replay([{ algorithm: "sliding-log", limit: 130, window: 100 }], 1_000_000, ops);
    await replay([{ algorithm: "sliding-log", limit: 1000, window: 300 }], 1_000_000, ops);
  });

  it("sliding log longer than the slots read with the header: ranges, wrap, folded writes, the rewrite when full", async () => {
    await fc.assert(
      fc.asyncProperty(longLogScenarioArb, ([spec, t0, ops]) => replay([spec], t0, ops)),
      { numRuns: 200 },
    );
  });

  it("sliding log whose memory ring wraps before limit: idle gaps, bursts, refunds, steps back", async () => {
    await fc.assert(
      fc.asyncProperty(wrapLogScenarioArb, ([spec, t0, ops]) => replay([spec], t0, ops)),
      { numRuns: 300 },
    );
  });

  it("sliding window: sub-windows near the epoch, refunds into the partly counted one", async () => {
    await fc.assert(
      fc.asyncProperty(windowScenarioArb, ([spec, t0, ops]) => replay([spec], t0, ops)),
      { numRuns: 400 },
    );
  });

  it("every algorithm with a clock that sometimes steps back (judge: the core algorithms, no expiry)", async () => {
    const backArb = fc.tuple(
      fc.array(anySpecArb, { minLength: 1, maxLength: 2 }),
      startArb,
      fc.array(
        fc.record({
          kind: fc.constantFrom<Op["kind"]>("consume", "consume", "consume", "peek", "refund"),
          dt: fc.oneof(fc.integer({ min: -20, max: -1 }), fc.integer({ min: 0, max: 40 })),
          key: fc.integer({ min: 0, max: 1 }),
          cost: fc.integer({ min: 1, max: 8 }),
          maxDelayMs: maxDelayArb,
        }),
        { minLength: 1, maxLength: 40 },
      ),
    );
    await fc.assert(
      fc.asyncProperty(backArb, ([specs, t0, ops]) => replay(specs, t0, [{ kind: "peek", dt: -1, key: 0, cost: 1 }, ...ops])),
      { numRuns: 200 },
    );
  });

  it("batch: the same traffic issued all at once (batched script calls) decides as one at a time", async () => {
    const batched = new RedisStore({ client, failure: "throw", timeoutMs: 10_000, minTtlMs: 600_000, batch: { maxBatch: 7 } });
    await fc.assert(
      fc.asyncProperty(scenarioArb, async ([specs, t0, ops]) => {
        const limits = resolveLimits(specs);
        const maxCost = Math.min(...limits.map((l) => l.capacity));
        const clock = { now: t0 };
        const namespace = `batch-${++run}`;
        const mem = new RateLimiter({ limits: specs, store: new MemoryStore({ sweepIntervalMs: 0 }), clock: () => clock.now, namespace });
        const red = new RateLimiter({ limits: specs, store: batched, clock: () => clock.now, namespace });
        // Every call is made before any reply: they queue and go in order, several per call.
        const pending: Array<Promise<unknown>> = [];
        const expected: unknown[] = [];
        for (const op of ops) {
          clock.now += op.dt;
          const key = `k${op.key}`;
          const cost = 1 + ((op.cost - 1) % maxCost);
          if (op.kind === "consume") {
            pending.push(red.consume(key, cost, op.maxDelayMs));
            expected.push(await mem.consume(key, cost, op.maxDelayMs));
          } else if (op.kind === "peek") {
            pending.push(red.peek(key, cost));
            expected.push(await mem.peek(key, cost));
          } else if (op.kind === "refund") {
            pending.push(red.refund(key, cost));
            expected.push(await mem.refund(key, cost));
          } else {
            pending.push(red.reset(key));
            expected.push(await mem.reset(key));
          }
        }
        expect(await Promise.all(pending)).toEqual(expected);
      }),
      { numRuns: 150 },
    );
  });

  it("same traffic, same decisions (every algorithm and option, 1-3 limits, refunds, resets)", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, ([specs, t0, ops]) => replay(specs, t0, ops)),
      { numRuns: 300 },
    );
  });
});
