/**
 * fast-check generators shared by the property tests (not a test file itself): limit specs of
 * every algorithm and option, start times, and traffic. Small numbers, so that edges (a window's
 * end, a full bucket, a cost equal to the capacity) are hit often.
 */
import fc from "fast-check";
import type { LimitSpec } from "../src/index.js";

const windowMsArb = fc.constantFrom(1, 2, 3, 5, 7, 10, 12, 60, 100, 1000);

/** Costs: mostly 1, sometimes up to 8 (the runners clamp a cost to the policy's capacity). */
export const costArb = fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 8 }));

/** A sliding window counter whose window is a whole number of sub-windows: `buckets * subMs`. */
export function slidingWindowArb(
  limit: fc.Arbitrary<number>,
  buckets: fc.Arbitrary<number>,
  subMs: fc.Arbitrary<number>,
): fc.Arbitrary<LimitSpec> {
  return fc.record({ limit, buckets, subMs, weighted: fc.boolean() }).map(({ limit, buckets, subMs, weighted }) => ({
    algorithm: "sliding-window" as const,
    limit,
    window: buckets * subMs,
    buckets,
    weighted,
  }));
}

/** A fixed window, aligned to the clock or to its key's first request. */
function fixedWindowArb(limit: fc.Arbitrary<number>, window: fc.Arbitrary<number>): fc.Arbitrary<LimitSpec> {
  return fc.record({
    algorithm: fc.constant("fixed-window" as const),
    limit,
    window,
    align: fc.constantFrom("clock" as const, "first-request" as const),
  });
}

/** A leaky bucket in one mode; `police` is the default, so that mode is sometimes left out. */
function leakyBucketArb(mode: "police" | "shape"): fc.Arbitrary<LimitSpec> {
  const fields = {
    algorithm: fc.constant("leaky-bucket" as const),
    limit: fc.integer({ min: 1, max: 6 }),
    window: windowMsArb,
    capacity: fc.integer({ min: 1, max: 8 }),
    mode: fc.constant(mode),
  };
  const required: Array<keyof typeof fields> =
    mode === "police" ? ["algorithm", "limit", "window"] : ["algorithm", "limit", "window", "mode"];
  return fc.record(fields, { requiredKeys: required });
}

/** Every algorithm, by name, with every option it takes. */
export const specArbs: Record<string, fc.Arbitrary<LimitSpec>> = {
  "fixed-window": fc.record({
    algorithm: fc.constant("fixed-window" as const),
    limit: fc.integer({ min: 1, max: 6 }),
    window: windowMsArb,
    align: fc.constantFrom("clock" as const, "first-request" as const),
  }),
  "sliding-log": fc.record({ algorithm: fc.constant("sliding-log" as const), limit: fc.integer({ min: 1, max: 6 }), window: windowMsArb }),
  "sliding-window": slidingWindowArb(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 5 }), fc.constantFrom(1, 2, 3, 5, 10, 60)),
  "token-bucket": fc.record(
    {
      algorithm: fc.constant("token-bucket" as const),
      limit: fc.integer({ min: 1, max: 6 }),
      window: windowMsArb,
      capacity: fc.integer({ min: 1, max: 8 }),
    },
    { requiredKeys: ["algorithm", "limit", "window"] },
  ),
  "leaky-bucket police": leakyBucketArb("police"),
  "leaky-bucket shape": leakyBucketArb("shape"),
  gcra: fc.record(
    {
      algorithm: fc.constant("gcra" as const),
      limit: fc.integer({ min: 1, max: 6 }),
      window: windowMsArb,
      burst: fc.integer({ min: 0, max: 5 }),
    },
    { requiredKeys: ["algorithm", "limit", "window"] },
  ),
};

/** Any algorithm with any option, small numbers. */
export const anySpecArb: fc.Arbitrary<LimitSpec> = fc.oneof(...Object.values(specArbs));

/** Realistic and extreme sizes: limits up to 10^6, windows up to a day, costs up to the capacity. */
export const bigSpecArb: fc.Arbitrary<LimitSpec> = (() => {
  const limit = fc.integer({ min: 1, max: 1_000_000 });
  const window = fc.integer({ min: 1, max: 86_400_000 });
  return fc.oneof(
    fixedWindowArb(limit, window),
    fc.record({ algorithm: fc.constant("sliding-log" as const), limit: fc.integer({ min: 1, max: 2_000 }), window }),
    slidingWindowArb(limit, fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 1_440_000 })),
    fc.record({ algorithm: fc.constant("token-bucket" as const), limit, window, capacity: fc.integer({ min: 1, max: 1_000_000 }) }),
    fc.record({
      algorithm: fc.constant("leaky-bucket" as const),
      limit,
      window,
      capacity: fc.integer({ min: 1, max: 1_000_000 }),
      mode: fc.constantFrom("police" as const, "shape" as const),
    }),
    fc.record({ algorithm: fc.constant("gcra" as const), limit, window, burst: fc.integer({ min: 0, max: 100_000 }) }),
  );
})();

/**
 * Specs for the memory store's rebase tests (memory-rebase*.test.ts): every algorithm with
 * `windows` (ms; long and awkward ones, whose periods a rebase must keep), limits and sub-windows
 * 1..`max`, a one-sub-window sliding window above 32,767 units (its ring of two counts, slot
 * `a mod 2`), GCRA with a burst, and the leaky bucket in `modes`.
 */
export function rebaseSpecArb(windows: number[], max: number, modes: ("police" | "shape")[]): fc.Arbitrary<LimitSpec> {
  const window = fc.constantFrom(...windows);
  const limit = fc.integer({ min: 1, max });
  return fc.oneof(
    fixedWindowArb(limit, window),
    slidingWindowArb(limit, fc.integer({ min: 1, max }), window),
    fc.record({ algorithm: fc.constant("sliding-window" as const), limit: fc.constant(40_000), window }),
    fc.record({ algorithm: fc.constant("sliding-log" as const), limit, window }),
    fc.record({ algorithm: fc.constant("token-bucket" as const), limit, window }),
    fc.record({ algorithm: fc.constant("gcra" as const), limit, window, burst: fc.nat(4) }),
    fc.record({ algorithm: fc.constant("leaky-bucket" as const), limit, window, mode: fc.constantFrom(...modes) }),
  );
}

/** Start times: near the epoch (fresh-state edge cases) or a realistic, unaligned clock. */
export const startArb = fc.oneof(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 1_700_000_000_000, max: 1_700_000_100_000 }));

/** Resolved window of a spec (the arbitraries only produce millisecond numbers). */
export const windowOf = (spec: LimitSpec) => spec.window as number;

/**
 * One to `maxLimits` specs, a start time, and traffic drawn by `trafficArb` for the longest of
 * their windows.
 */
export function limitsWithTraffic<T>(
  specArb: fc.Arbitrary<LimitSpec>,
  maxLimits: number,
  trafficArb: (windowMs: number) => fc.Arbitrary<T>,
): fc.Arbitrary<[LimitSpec[], number, T]> {
  return fc
    .array(specArb, { minLength: 1, maxLength: maxLimits })
    .chain((specs) => fc.tuple(fc.constant(specs), startArb, trafficArb(Math.max(...specs.map(windowOf)))));
}

/** One operation on a single limit's state, for the pure-algorithm runners. */
export interface Op {
  kind: "consume" | "peek" | "refund";
  /** Time since the previous op (ms). */
  dt: number;
  /** Cost; clamped to the policy's largest admissible cost by the runner. */
  c: number;
}

/** Traffic: mostly consumes, some at the same instant, some across several windows. */
export function opsArb(windowMs: number, maxLength = 40, refunds = true): fc.Arbitrary<Op[]> {
  const kinds: Array<Op["kind"]> = refunds
    ? ["consume", "consume", "consume", "consume", "peek", "refund"]
    : ["consume", "consume", "consume", "peek"];
  return fc.array(
    fc.record({
      kind: fc.constantFrom(...kinds),
      dt: fc.oneof(
        { weight: 3, arbitrary: fc.constant(0) },
        { weight: 4, arbitrary: fc.integer({ min: 0, max: Math.max(1, Math.ceil(windowMs / 3)) }) },
        { weight: 2, arbitrary: fc.integer({ min: 0, max: 3 * windowMs }) },
      ),
      c: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: 8 }) }),
    }),
    { minLength: 1, maxLength },
  );
}
