/**
 * Quota leasing on Redis (scripts/lease.lua, stores/redis/lease-source.ts):
 * - the differential test: random takes and give-backs by up to four instances on a few keys
 *   give the same blocks (and lessee counts) from Redis as from the in-memory reference
 *   (core/lease-block.ts), for fixed windows (both alignments), token and leaky buckets and GCRA;
 * - leased and per-decision limiters of one policy share the key's allowance;
 * - RedisStore.close() gives unused units back; a store that fails hands the decisions to the
 *   failure policy; the option is checked.
 */
import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { RateLimiter, RateLimitConfigError, resolveLimit, type LimitSpec } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { RedisBlockSource } from "../src/stores/redis/lease-source.js";
import { MemoryBlockSource, SharedState } from "./lease-source-model.js";

let seq = 0;
const uniq = (tag: string) => `${tag}${process.pid}-${++seq}`;

const SPECS: fc.Arbitrary<LimitSpec> = fc.oneof(
  fc.record({
    algorithm: fc.constant("fixed-window" as const),
    limit: fc.integer({ min: 1, max: 50 }),
    window: fc.integer({ min: 10, max: 5000 }),
  }),
  fc.record({
    algorithm: fc.constant("fixed-window" as const),
    limit: fc.integer({ min: 1, max: 50 }),
    window: fc.integer({ min: 10, max: 5000 }),
    align: fc.constant("first-request" as const),
  }),
  fc.record({
    algorithm: fc.constantFrom("token-bucket" as const, "leaky-bucket" as const),
    limit: fc.integer({ min: 1, max: 50 }),
    window: fc.integer({ min: 10, max: 5000 }),
    capacity: fc.integer({ min: 1, max: 80 }),
  }),
  fc.record({
    algorithm: fc.constant("gcra" as const),
    limit: fc.integer({ min: 1, max: 50 }),
    window: fc.integer({ min: 10, max: 5000 }),
    burst: fc.integer({ min: 0, max: 40 }),
  }),
);

type Op =
  | { kind: "take"; dt: number; inst: number; key: number; want: number }
  | { kind: "give"; dt: number; inst: number; key: number; units: number; back: number }
  | { kind: "reset"; dt: number; key: number };

/** Random takes, give-backs and resets, `dt` ms apart (Redis's clock: a negative dt is a step back). */
const opsWith = (dt: fc.Arbitrary<number>): fc.Arbitrary<Op[]> =>
  fc.array(
    fc.oneof(
      {
        weight: 3,
        arbitrary: fc.record({
          kind: fc.constant("take" as const),
          dt,
          inst: fc.integer({ min: 0, max: 3 }),
          key: fc.integer({ min: 0, max: 1 }),
          want: fc.integer({ min: 1, max: 60 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant("give" as const),
          dt,
          inst: fc.integer({ min: 0, max: 3 }),
          key: fc.integer({ min: 0, max: 1 }),
          units: fc.integer({ min: 1, max: 30 }),
          back: fc.integer({ min: 0, max: 400 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant("reset" as const),
          dt,
          key: fc.integer({ min: 0, max: 1 }),
        }),
      },
    ),
    { minLength: 1, maxLength: 40 },
  );
const OPS = opsWith(fc.integer({ min: 0, max: 300 }));
// Redis's clock stepping back and forth (NTP, a VM restored), up to 5 s at a time, with blocks out.
const STEPPING = opsWith(fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: -5000, max: 5000 })));

describeRedis("quota leasing on Redis", () => {
  let redis: RedisHandle;
  let client: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  /** lease.lua against the reference (core/lease-block.ts) on `ops`, from a time drawn by `t0`. */
  const differential = async (t0s: fc.Arbitrary<number>, opss: fc.Arbitrary<Op[]>): Promise<void> => {
    // With an injected clock the TTLs are logical: keep keys for the test's real duration.
    const store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000, minTtlMs: 600_000 });
    await fc.assert(
      fc.asyncProperty(SPECS, fc.integer({ min: 1, max: 200 }), t0s, opss, async (spec, blockMs, t0, ops) => {
        const lim = resolveLimit(spec);
        const ns = uniq("ld");
        const lease = { blockMs, maxKeys: 10 };
        const shared = new SharedState(lim);
        const model = [0, 1, 2, 3].map((i) => new MemoryBlockSource(shared, `i${i}`, 4 * blockMs));
        const real = [0, 1, 2, 3].map(() => new RedisBlockSource(store, lim, ns, lease));
        // Resets go through the per-decision script (ratekeeper.lua), which raises the key's epoch
        // at Redis's time, not at t: each side gives back with the epoch of the instance's last
        // take on the key there, and the takes are compared on whether the epoch changed since.
        const resetter = new RateLimiter({ ...spec, namespace: ns, store });
        const epochs = { real: new Map<string, number>(), model: new Map<string, number>() };
        let t = t0;
        for (const [step, op] of ops.entries()) {
          t += op.dt;
          const key = `k${op.key}`;
          if (op.kind === "reset") {
            await resetter.reset(key);
            shared.reset(key, t);
          } else if (op.kind === "take") {
            const slot = `${op.inst}:${key}`;
            const { epoch: realEpoch, ...got } = await (real[op.inst] as RedisBlockSource).take(key, op.want, t);
            const { lessees, epoch: modelEpoch, ...want } = (model[op.inst] as MemoryBlockSource).takeNow(key, op.want, t);
            expect(got, `take at step ${step}`).toEqual(want);
            expect((real[op.inst] as RedisBlockSource).lessees).toBe(lessees);
            const changed = (m: Map<string, number>, e: number) => (m.get(slot) ?? 0) !== e;
            expect(changed(epochs.real, realEpoch), `epoch changed at step ${step}`).toBe(changed(epochs.model, modelEpoch));
            epochs.real.set(slot, realEpoch);
            epochs.model.set(slot, modelEpoch);
          } else {
            const slot = `${op.inst}:${key}`;
            // A block start from the past: the current window's (or one that ended), or a bucket's take time.
            const start = lim.algorithm === "fixed-window" ? t - (t % lim.windowMs) - (op.back > 200 ? lim.windowMs : 0) : t - op.back;
            await (real[op.inst] as RedisBlockSource).give(key, op.units, start, epochs.real.get(slot) ?? 0, t);
            (model[op.inst] as MemoryBlockSource).giveNow(key, op.units, start, epochs.model.get(slot) ?? 0, t);
          }
        }
      }),
      { numRuns: 80 },
    );
  };

  it("takes and gives back exactly as the reference: random traffic of four instances on two keys", async () => {
    await differential(fc.integer({ min: 0, max: 2 ** 41 }), OPS);
  });

  // Steps back keep a fixed window's later state (windowStart takes the state's start) and stop a
  // bucket's drain until the clock is past its last update; give-backs are credited by the same
  // clock. Steps forward end windows and drain buckets early, as they do per decision.
  it("takes and gives back exactly as the reference with Redis's clock stepping back and forth", async () => {
    await differential(fc.integer({ min: 1_000_000, max: 2 ** 41 }), STEPPING);
  });

  // A namespace with ":" or "%" is written escaped in the keys (key-part.ts): both must escape it alike.
  it.each(["mix", "mix:a%"])("leased and per-decision limiters of one policy share the key's allowance (namespace %s...)", async (tag) => {
    const store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000 });
    const spec = { algorithm: "fixed-window", limit: 100, window: "1h", namespace: uniq(tag), store } as const;
    const leased = new RateLimiter({ ...spec, lease: true });
    const plain = new RateLimiter(spec);
    expect((await leased.consume("k")).allowed).toBe(true); // the first take: what waits (1 unit)
    await Promise.all(Array.from({ length: 10 }, () => leased.consume("k"))); // a burst: a bigger block
    const taken = 100 - (await plain.peek("k")).remaining - 1;
    expect(taken).toBeGreaterThanOrEqual(11);
    await store.close(); // the unused units go back
    expect((await plain.peek("k")).remaining).toBe(100 - 11 - 1);
  });

  it("with an injected clock, RedisStore.close() gives the unused units back at a time on that clock", async () => {
    // close() has no reading of the limiter's clock; given back at Redis's TIME, a day past the
    // block's window on a clock a day behind, the units fell outside it and were never returned.
    const store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000 });
    const clock = () => Date.now() - 86_400_000;
    const spec = { algorithm: "fixed-window", limit: 100, window: "1h", namespace: uniq("clock"), store, clock } as const;
    const leased = new RateLimiter({ ...spec, lease: true });
    const plain = new RateLimiter(spec);
    expect((await leased.consume("k")).allowed).toBe(true);
    await Promise.all(Array.from({ length: 10 }, () => leased.consume("k"))); // a bigger block
    expect(100 - (await plain.peek("k")).remaining - 1).toBeGreaterThanOrEqual(11);
    await store.close();
    expect((await plain.peek("k")).remaining).toBe(100 - 11 - 1);
  });

  it("a store that fails: the leased decisions get the failure policy", async () => {
    const dead = new Redis(1, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    dead.on("error", () => undefined);
    const store = new RedisStore({ client: dead, failure: "closed", timeoutMs: 200 });
    const limiter = new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", store, lease: true, namespace: uniq("dead") });
    expect(await limiter.consume("k")).toMatchObject({ allowed: false, reason: "store-error" });
    dead.disconnect();
  });
});

describe("the lease option", () => {
  it("is checked: one limit of a leasable algorithm, known fields", () => {
    const bad = (o: Record<string, unknown>) => {
      try {
        new RateLimiter(o as never);
      } catch (e) {
        return (e as RateLimitConfigError).issues.map((i) => `${i.path}: ${i.message}`).join("\n");
      }
      return "";
    };
    expect(bad({ algorithm: "sliding-log", limit: 5, window: "1s", lease: true })).toMatch(/lease: cannot hold the bound of "sliding-log"/);
    expect(bad({ algorithm: "leaky-bucket", mode: "shape", limit: 5, window: "1s", lease: true })).toMatch(/mode "shape"/);
    expect(
      bad({
        limits: [
          { algorithm: "gcra", limit: 5, window: "1s" },
          { algorithm: "gcra", limit: 50, window: "1m" },
        ],
        lease: true,
      }),
    ).toMatch(/lease: works with one limit/);
    expect(bad({ algorithm: "gcra", limit: 5, window: "1s", lease: { blockMs: "soon", size: 3 } })).toMatch(
      /lease.size: unknown option[\s\S]*lease.blockMs/,
    );
    expect(bad({ algorithm: "gcra", limit: 5, window: "1s", lease: "yes" })).toMatch(/lease: must be true, false/);
    expect(bad({ algorithm: "token-bucket", limit: 5, window: "1s", lease: { blockMs: 50 } })).toBe("");
  });
});
