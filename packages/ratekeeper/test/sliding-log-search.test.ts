/**
 * The sliding log's search for the edge of the window starts from a hint (sliding-log.ts
 * firstInside). The hint must only make the search shorter: before every operation, a plain
 * bisection over the same ring (below, the reference) must give the same outcome, with limits
 * large enough for the gallop and the bisection to run, several units per millisecond, clocks
 * that step back, refunds and peeks. (That the ring itself decides as a log that keeps every unit
 * is sliding-log-ring.test.ts.)
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { slidingLog, logOutcome } from "../src/core/algorithms/sliding-log.js";
import type { LimitState } from "../src/core/algorithms/types.js";
import { newOutcome, type Outcome } from "../src/core/decision.js";
import { resolveLimit } from "../src/index.js";
import type { ResolvedLimit } from "../src/core/options.js";

/**
 * The check as a bisection over every position the ring holds (n - C .. n - 1, C its capacity,
 * the last slot the high-water mark), with no hint.
 */
function referenceCheck(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit, out: Outcome): void {
  const L = lim.limit;
  const ring = s.ring as Float64Array;
  const C = ring.length - 1;
  const n = s.a;
  const t = n > 0 ? Math.max(nowMs, ring[C] as number) : nowMs;
  let lo = Math.max(0, n - C);
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ring[mid % C] as number) <= t - lim.windowMs) lo = mid + 1;
    else hi = mid;
  }
  const free = lo - (n - L);
  if (free >= cost) logOutcome(free, t, 0, nowMs, cost, lim, out);
  else logOutcome(free, ring[(n - 1) % C] as number, ring[(n - L + cost - 1) % C] as number, nowMs, cost, lim, out);
}

type Op = { kind: "consume" | "peek" | "refund" | "check-commit"; dt: number; c: number };

const opArb = (limit: number, windowMs: number): fc.Arbitrary<Op> =>
  fc.record({
    kind: fc.constantFrom("consume", "consume", "consume", "peek", "refund", "check-commit"),
    dt: fc.oneof(
      { weight: 6, arbitrary: fc.constant(0) }, // several decisions in one millisecond
      { weight: 6, arbitrary: fc.integer({ min: 1, max: Math.max(1, Math.floor(windowMs / 4)) }) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: windowMs }) }, // the edge jumps many units
      { weight: 1, arbitrary: fc.integer({ min: windowMs, max: 3 * windowMs }) },
      { weight: 1, arbitrary: fc.integer({ min: -2 * windowMs, max: -1 }) }, // the clock steps back
    ),
    c: fc.oneof(
      { weight: 3, arbitrary: fc.constant(1) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: Math.min(limit, 20) }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: limit }) },
    ),
  });

/** Short windows holding many units at distinct times: the edge moves by any number of units. */
const denseOpArb = (limit: number, windowMs: number): fc.Arbitrary<Op> =>
  fc.record({
    kind: fc.constantFrom("consume", "consume", "consume", "peek", "refund", "check-commit"),
    dt: fc.oneof(
      { weight: 12, arbitrary: fc.integer({ min: 0, max: 2 }) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: windowMs }) },
      { weight: 1, arbitrary: fc.integer({ min: -windowMs, max: -1 }) },
    ),
    c: fc.oneof({ weight: 6, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: Math.min(limit, 8) }) }),
  });

const denseArb = fc
  .record({ limit: fc.integer({ min: 1, max: 60 }), window: fc.integer({ min: 2, max: 40 }) })
  .chain((spec) => fc.tuple(fc.constant(spec), fc.array(denseOpArb(spec.limit, spec.window), { minLength: 1, maxLength: 400 })));

const scenarioArb = fc
  .record({ limit: fc.integer({ min: 1, max: 300 }), window: fc.integer({ min: 1, max: 200 }) })
  .chain((spec) => fc.tuple(fc.constant(spec), fc.array(opArb(spec.limit, spec.window), { minLength: 1, maxLength: 400 })));

function sameAsBisection([spec, ops]: [{ limit: number; window: number }, Op[]]): void {
  const lim = resolveLimit({ algorithm: "sliding-log", ...spec });
  const s = slidingLog.init(lim);
  const got = newOutcome();
  const want = newOutcome();
  let now = 1_700_000_000_000;
  for (const [i, op] of ops.entries()) {
    now += op.dt;
    if (op.kind === "refund") {
      slidingLog.refund(s, now, op.c, lim);
      continue;
    }
    referenceCheck(s, now, op.c, lim, want);
    if (op.kind === "consume") slidingLog.consume(s, now, op.c, lim, got);
    else {
      slidingLog.check(s, now, op.c, lim, got);
      if (got.allowed && op.kind === "check-commit") slidingLog.commit(s, now, op.c, lim);
    }
    expect(got, `outcome of op ${i}`).toEqual(want);
  }
}

describe("sliding log: the search from a hint decides as the plain bisection did", () => {
  it("same outcomes, operation by operation", () => {
    fc.assert(fc.property(scenarioArb, sameAsBisection), { numRuns: 300 });
  });

  it("the same with short windows full of units, where the edge moves by any number of them", () => {
    fc.assert(fc.property(denseArb, sameAsBisection), { numRuns: 300 });
  });

  it("any hint, on any sorted log, any cost: the outcome a linear count finds", () => {
    const logArb = fc
      .record({ limit: fc.integer({ min: 1, max: 64 }), n: fc.integer({ min: 0, max: 200 }), spare: fc.nat(64) })
      .chain(({ limit, n, spare }) => {
        // The ring's capacity: anything up to `limit` (it wraps before it is full).
        const capacity = Math.min(limit, 1 + spare);
        return fc.record({
          limit: fc.constant(limit),
          n: fc.constant(n),
          capacity: fc.constant(capacity),
          times: fc.array(fc.integer({ min: 0, max: 30 }), { minLength: Math.min(n, capacity), maxLength: Math.min(n, capacity) }),
          hint: fc.integer({ min: -3, max: n + 3 }),
          cutoff: fc.integer({ min: -2, max: 32 }),
          cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: limit })),
        });
      });
    fc.assert(
      fc.property(logArb, ({ limit, n, capacity, times, hint, cutoff, cost }) => {
        const W = 1_000;
        const lim = resolveLimit({ algorithm: "sliding-log", limit, window: W });
        const ring = new Float64Array(capacity + 1);
        const sorted = times.sort((x, y) => x - y);
        const first = n - sorted.length; // the oldest position still in the ring; those before it are outside
        sorted.forEach((t, i) => (ring[(first + i) % capacity] = t));
        ring[capacity] = sorted[sorted.length - 1] ?? 0; // the high-water mark, not ahead of the check's time
        // Units that left the ring (before `first`) are outside the window, as in a real log.
        const free = limit - sorted.filter((t) => t > cutoff).length;
        const now = cutoff + W; // after every unit: the log decides as at now
        const m = sorted.length;
        const want =
          free >= cost
            ? { allowed: true, remaining: free - cost, retryAfterMs: 0, resetAfterMs: W, delayMs: 0 }
            : {
                allowed: false,
                remaining: free,
                // The deciding unit: limit - cost + 1 before the newest; room comes when it leaves.
                retryAfterMs: (sorted[m - (limit - cost + 1)] as number) + W - now,
                resetAfterMs: (sorted[m - 1] as number) + W - now,
                delayMs: 0,
              };
        const out = newOutcome();
        slidingLog.check({ a: n, b: hint, ring }, now, cost, lim, out);
        expect(out).toEqual(want);
      }),
      { numRuns: 3000 },
    );
  });
});
