/**
 * The sliding log keeps its units in a ring that wraps before it has `limit` slots: it grows only
 * when the slot it would overwrite holds a unit still inside the window. That is exact only
 * because of two rules, which the model below states literally:
 * - a clock that steps back: the log decides as at the newest time a unit was logged at (its
 *   high-water mark), so a unit outside the window once stays outside for every later decision;
 * - a refund takes back the newest units but not the high-water mark.
 * The model keeps every unit ever admitted (no ring, no search): the ring must decide exactly as
 * it does, field for field, through consumes, peeks, check + commit, refunds, clocks that step
 * back and idle gaps of many windows, and hold at most about twice its busiest window.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { slidingLog, FIRST_CAPACITY } from "../src/core/algorithms/sliding-log.js";
import type { LimitState } from "../src/core/algorithms/types.js";
import { newOutcome } from "../src/core/decision.js";
import type { ResolvedLimit } from "../src/core/options.js";
import { resolveLimit } from "../src/index.js";

/** Every admitted unit's time, oldest first, and the newest time a unit was logged at. */
class UnboundedLog {
  readonly times: number[] = [];
  high = Number.NEGATIVE_INFINITY;
  constructor(readonly lim: ResolvedLimit) {}

  /** The time a decision at `nowMs` is made as: the high-water mark while the log holds units. */
  private at(nowMs: number): number {
    return this.times.length > 0 ? Math.max(nowMs, this.high) : nowMs;
  }

  decide(
    nowMs: number,
    cost: number,
  ): { allowed: boolean; remaining: number; retryAfterMs: number; resetAfterMs: number; delayMs: number } {
    const { limit: L, windowMs: W } = this.lim;
    const t = this.at(nowMs);
    const inside = this.times.filter((u) => u > t - W).length;
    if (inside + cost <= L)
      return { allowed: true, remaining: L - inside - cost, retryAfterMs: 0, resetAfterMs: t - nowMs + W, delayMs: 0 };
    // Room for `cost` comes when the (inside + cost - L)-th oldest unit inside the window leaves;
    // the window is empty when the newest one does. Both counted on the caller's clock.
    const n = this.times.length;
    const decider = this.times[n - inside + (inside + cost - L) - 1] as number;
    const newest = this.times[n - 1] as number;
    return { allowed: false, remaining: L - inside, retryAfterMs: decider + W - nowMs, resetAfterMs: newest + W - nowMs, delayMs: 0 };
  }

  commit(nowMs: number, cost: number): void {
    const t = this.at(nowMs);
    for (let i = 0; i < cost; i++) this.times.push(t);
    this.high = t;
  }

  /** The newest `cost` units did not happen; the high-water mark stays. */
  refund(cost: number): void {
    this.times.length -= Math.min(cost, this.times.length);
  }

  /** Units inside the window of a decision at `nowMs`. */
  inside(nowMs: number): number {
    const t = this.at(nowMs);
    return this.times.filter((u) => u > t - this.lim.windowMs).length;
  }
}

/** The ring's capacity in units: its last slot holds the high-water mark. */
const capacityOf = (s: LimitState) => (s.ring as Float64Array).length - 1;

type Op = { kind: "consume" | "peek" | "refund" | "check-commit"; dt: number; c: number };

const opArb = (limit: number, windowMs: number): fc.Arbitrary<Op> =>
  fc.record({
    kind: fc.constantFrom("consume", "consume", "consume", "peek", "refund", "check-commit"),
    dt: fc.oneof(
      { weight: 6, arbitrary: fc.constant(0) }, // several decisions in one millisecond
      { weight: 6, arbitrary: fc.integer({ min: 1, max: Math.max(1, Math.floor(windowMs / 4)) }) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: windowMs }) },
      { weight: 1, arbitrary: fc.integer({ min: windowMs, max: 50 * windowMs }) }, // an idle gap
      { weight: 2, arbitrary: fc.integer({ min: -2 * windowMs, max: -1 }) }, // the clock steps back
    ),
    c: fc.oneof(
      { weight: 4, arbitrary: fc.constant(1) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: Math.min(limit, 20) }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: limit }) },
    ),
  });

/** Limits well above what the traffic keeps in a window, so the ring wraps long before `limit`. */
const scenarioArb = fc
  .record({ limit: fc.integer({ min: 1, max: 300 }), window: fc.integer({ min: 1, max: 200 }) })
  .chain((spec) => fc.tuple(fc.constant(spec), fc.array(opArb(spec.limit, spec.window), { minLength: 1, maxLength: 400 })));

/** Short windows, one or two units a millisecond: the window's edge moves by any number of units. */
const denseArb = fc.record({ limit: fc.integer({ min: 1, max: 60 }), window: fc.integer({ min: 2, max: 40 }) }).chain((spec) =>
  fc.tuple(
    fc.constant(spec),
    fc.array(
      fc.record({
        kind: fc.constantFrom<Op["kind"]>("consume", "consume", "consume", "peek", "refund", "check-commit"),
        dt: fc.oneof(
          { weight: 12, arbitrary: fc.integer({ min: 0, max: 2 }) },
          { weight: 2, arbitrary: fc.integer({ min: 1, max: 4 * spec.window }) },
          { weight: 2, arbitrary: fc.integer({ min: -spec.window, max: -1 }) },
        ),
        c: fc.oneof(
          { weight: 6, arbitrary: fc.constant(1) },
          { weight: 1, arbitrary: fc.integer({ min: 1, max: Math.min(spec.limit, 8) }) },
        ),
      }),
      { minLength: 1, maxLength: 400 },
    ),
  ),
);

/**
 * Keys kept full: traffic far above the limit, so most decisions are denials, many of them on the
 * window's exact edge (steps of a whole window), with costs up to the limit (a denial's deciding
 * unit then lies beyond a small ring), refunds and clocks that step back.
 */
const fullArb = fc.record({ limit: fc.integer({ min: 1, max: 40 }), window: fc.integer({ min: 1, max: 30 }) }).chain((spec) =>
  fc.tuple(
    fc.constant(spec),
    fc.array(
      fc.record({
        kind: fc.constantFrom<Op["kind"]>("consume", "consume", "consume", "consume", "peek", "refund", "check-commit"),
        dt: fc.oneof(
          { weight: 10, arbitrary: fc.integer({ min: 0, max: 1 }) },
          { weight: 3, arbitrary: fc.constant(spec.window) },
          { weight: 2, arbitrary: fc.integer({ min: 1, max: 2 * spec.window }) },
          { weight: 1, arbitrary: fc.integer({ min: -spec.window, max: -1 }) },
        ),
        c: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: spec.limit }) }),
      }),
      { minLength: 1, maxLength: 400 },
    ),
  ),
);

function sameAsUnboundedLog([spec, ops]: [{ limit: number; window: number }, Op[]]): void {
  const lim = resolveLimit({ algorithm: "sliding-log", ...spec });
  const s = slidingLog.init(lim);
  const model = new UnboundedLog(lim);
  const got = newOutcome();
  // The most units any commit needed in its window (those inside, plus its own).
  let busiest = 0;
  let now = 1_700_000_000_000;
  for (const [i, op] of ops.entries()) {
    now += op.dt;
    const c = Math.min(op.c, lim.limit);
    if (op.kind === "refund") {
      slidingLog.refund(s, now, c, lim);
      model.refund(c);
      continue;
    }
    const want = model.decide(now, c);
    if (op.kind === "consume") slidingLog.consume(s, now, c, lim, got);
    else slidingLog.check(s, now, c, lim, got);
    expect({ ...got }, `op ${i}: ${op.kind} ${c} at +${now - 1_700_000_000_000}`).toEqual(want);
    if (want.allowed && op.kind !== "peek") {
      busiest = Math.max(busiest, model.inside(now) + c);
      if (op.kind === "check-commit") slidingLog.commit(s, now, c, lim);
      model.commit(now, c);
    }
    expect(s.a, `units after op ${i}`).toBe(model.times.length);
    expect(capacityOf(s), `the ring after op ${i} (busiest window ${busiest})`).toBeLessThanOrEqual(
      Math.max(Math.min(FIRST_CAPACITY, lim.limit), 2 * busiest),
    );
  }
}

describe("sliding log: a ring that wraps before `limit` decides as an unbounded log", () => {
  it("same outcomes, operation by operation; the ring holds at most twice its busiest window", () => {
    fc.assert(fc.property(scenarioArb, sameAsUnboundedLog), { numRuns: 400 });
  });

  it("the same with short windows full of units", () => {
    fc.assert(fc.property(denseArb, sameAsUnboundedLog), { numRuns: 300 });
  });

  it("the same for keys kept full, where most decisions are denials", () => {
    fc.assert(fc.property(fullArb, sameAsUnboundedLog), { numRuns: 400 });
  });

  it("a long-lived key at a low rate holds about twice its window, not `limit` slots", () => {
    // 1,000 per minute, one request a second for three hours: 60 units in any window.
    const lim = resolveLimit({ algorithm: "sliding-log", limit: 1000, window: 60_000 });
    const s = slidingLog.init(lim);
    const out = newOutcome();
    for (let i = 0; i < 3 * 3600; i++) {
      slidingLog.consume(s, 1_700_000_000_000 + 1000 * i, 1, lim, out);
      expect(out.allowed).toBe(true);
    }
    expect(capacityOf(s)).toBeLessThanOrEqual(2 * 61);
  });
});
