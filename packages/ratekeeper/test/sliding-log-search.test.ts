/**
 * The sliding log's search for the edge of the window starts from a hint (sliding-log.ts
 * firstInside). The hint must only make the search shorter: against the bisection the log used
 * before it (copied below as the reference), the same operations give the same outcomes and the
 * same log (`a` and every slot of the ring), with limits large enough for the gallop and the
 * bisection to run, several units per millisecond, clocks that step back, refunds and peeks.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { slidingLog, logOutcome } from "../src/core/algorithms/sliding-log.js";
import type { LimitState } from "../src/core/algorithms/types.js";
import { newOutcome, type Outcome } from "../src/core/decision.js";
import { resolveLimit } from "../src/index.js";
import type { ResolvedLimit } from "../src/core/options.js";

/** The check of the log before the hint: a bisection over all `limit` positions. */
function referenceCheck(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit, out: Outcome): void {
  const L = lim.limit;
  const ring = s.ring as Float64Array;
  const C = ring.length;
  const cutoff = nowMs - lim.windowMs;
  let lo = Math.max(0, L - s.a);
  let hi = L;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ring[(s.a - L + mid) % C] as number) <= cutoff) lo = mid + 1;
    else hi = mid;
  }
  const newest = s.a > 0 ? (ring[(s.a - 1) % C] as number) : nowMs;
  const decider = lo >= cost ? 0 : (ring[(s.a - L + cost - 1) % C] as number);
  logOutcome(lo, newest, decider, nowMs, cost, lim, out);
}

/** The commit of the log before the hint (the ring grows as it still does). */
function referenceCommit(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit): void {
  const L = lim.limit;
  let ring = s.ring as Float64Array;
  const t = s.a > 0 ? Math.max(nowMs, ring[(s.a - 1) % ring.length] as number) : nowMs;
  if (s.a + cost > ring.length && ring.length < L) {
    const grown = new Float64Array(Math.min(L, Math.max(2 * ring.length, s.a + cost)));
    grown.set(ring);
    s.ring = ring = grown;
  }
  const C = ring.length;
  for (let i = 0; i < cost; i++) ring[(s.a + i) % C] = t;
  s.a += cost;
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
  const r = slidingLog.init(lim);
  const got = newOutcome();
  const want = newOutcome();
  let now = 1_700_000_000_000;
  for (const [i, op] of ops.entries()) {
    now += op.dt;
    if (op.kind === "refund") {
      slidingLog.refund(s, now, op.c, lim);
      slidingLog.refund(r, now, op.c, lim);
    } else {
      referenceCheck(r, now, op.c, lim, want);
      if (want.allowed && op.kind !== "peek") referenceCommit(r, now, op.c, lim);
      if (op.kind === "consume") slidingLog.consume(s, now, op.c, lim, got);
      else {
        slidingLog.check(s, now, op.c, lim, got);
        if (got.allowed && op.kind === "check-commit") slidingLog.commit(s, now, op.c, lim);
      }
      expect(got, `outcome of op ${i}`).toEqual(want);
    }
    expect(s.a, `units after op ${i}`).toBe(r.a);
    expect(Array.from(s.ring as Float64Array), `log after op ${i}`).toEqual(Array.from(r.ring as Float64Array));
  }
}

describe("sliding log: the search from a hint decides as the plain bisection did", () => {
  it("same outcomes and the same log, operation by operation", () => {
    fc.assert(fc.property(scenarioArb, sameAsBisection), { numRuns: 300 });
  });

  it("the same with short windows full of units, where the edge moves by any number of them", () => {
    fc.assert(fc.property(denseArb, sameAsBisection), { numRuns: 300 });
  });

  it("any hint, on any sorted log: the free units a linear count finds", () => {
    const logArb = fc
      .record({ limit: fc.integer({ min: 1, max: 64 }), n: fc.integer({ min: 0, max: 200 }), spare: fc.nat(64) })
      .chain(({ limit, n, spare }) =>
        fc.record({
          limit: fc.constant(limit),
          n: fc.constant(n),
          // The ring's length: `limit` once full, else at least n (it grows on demand).
          capacity: fc.constant(n >= limit ? limit : Math.min(limit, Math.max(n, 1) + spare)),
          times: fc.array(fc.integer({ min: 0, max: 30 }), { minLength: Math.min(n, limit), maxLength: Math.min(n, limit) }),
          hint: fc.integer({ min: -3, max: n + 3 }),
          cutoff: fc.integer({ min: -2, max: 32 }),
        }),
      );
    fc.assert(
      fc.property(logArb, ({ limit, n, capacity, times, hint, cutoff }) => {
        const W = 1_000;
        const lim = resolveLimit({ algorithm: "sliding-log", limit, window: W });
        const ring = new Float64Array(capacity);
        const sorted = times.sort((x, y) => x - y);
        const first = n - sorted.length; // the oldest position still in the log
        sorted.forEach((t, i) => (ring[(first + i) % capacity] = t));
        const free = limit - sorted.length + sorted.filter((t) => t <= cutoff).length;
        const out = newOutcome();
        slidingLog.check({ a: n, b: hint, ring }, cutoff + W, 1, lim, out);
        expect(out.allowed ? out.remaining + 1 : out.remaining).toBe(free);
      }),
      { numRuns: 3000 },
    );
  });
});
