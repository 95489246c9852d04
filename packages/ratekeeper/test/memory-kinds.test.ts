/**
 * The memory store's tables of one limit (stores/memory-kinds.ts: one class per algorithm, each
 * calling its algorithm directly, with the key's expiry set from the decision) decide exactly as
 * the generic Evaluator does: same decisions, field by field, for every algorithm and option,
 * through consumes (with and without a shaping bound), peeks, refunds, idle gaps of several
 * windows (the store's entry expires and starts afresh) and a clock that steps back.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Evaluator } from "../src/core/evaluate.js";
import { MemoryStore, resolveLimits, type LimitSpec } from "../src/index.js";
import { anySpecArb, bigSpecArb, opsArb, startArb, windowOf } from "./arbitraries.js";

const scenario = (specArb: fc.Arbitrary<LimitSpec>) =>
  specArb.chain((spec) =>
    fc.tuple(
      fc.constant(spec),
      startArb,
      opsArb(windowOf(spec), 40, true),
      // Per op: how far the clock steps back first (mostly not at all), and a shaping bound.
      fc.array(
        fc.tuple(
          fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, fc.integer({ min: 1, max: windowOf(spec) })),
          fc.option(fc.nat(windowOf(spec))),
        ),
        {
          minLength: 40,
          maxLength: 40,
        },
      ),
    ),
  );

/**
 * The reference: the Evaluator on one state, with the store's expiry written out from the
 * Evaluator's own `ttlMs` (a key is live while `t < exp`; an allowed consume sets `exp = t +
 * ttlMs`; a consume on a dead key starts from a fresh state, a peek of one sees a fresh state, a
 * refund of one does nothing).
 */
function check([spec, t0, ops, extras]: [LimitSpec, number, { kind: string; dt: number; c: number }[], [number, number | null][]]) {
  const limits = resolveLimits([spec]);
  const table = new MemoryStore().bind(limits, "kinds");
  const ev = new Evaluator(limits);
  let st = ev.init1();
  let exp = Number.NEGATIVE_INFINITY;
  const capacity = Math.min(...limits.map((l) => l.capacity));
  let t = t0;
  ops.forEach((op, i) => {
    const [back, bound] = extras[i] as [number, number | null];
    t = Math.max(0, t + op.dt - back);
    const c = Math.min(op.c, capacity);
    const maxDelay = bound ?? undefined;
    const live = t < exp;
    if (op.kind === "consume") {
      if (!live) st = ev.init1();
      const want = ev.run1(st, t, c, true, maxDelay);
      if (want.allowed) exp = t + ev.ttlMs;
      expect(table.consume("k", c, t, maxDelay)).toEqual(want);
    } else if (op.kind === "peek") expect(table.peek("k", c, t)).toEqual(ev.run1(live ? st : ev.init1(), t, c, false));
    else {
      void table.refund("k", c, t);
      if (live) ev.refund([st], t, c);
    }
  });
}

/**
 * Keys that are mostly denied, for the sliding tables' remembered denial (memory-kinds.ts,
 * DenialSlot): small limits, costs mostly 1, the clock moving a little, now and then stepping
 * back or jumping over the window, with refunds and peeks among the consumes.
 */
const deniedScenario = fc
  .record({
    sliding: fc.oneof(
      fc.record({
        algorithm: fc.constant("sliding-window" as const),
        buckets: fc.integer({ min: 1, max: 12 }),
        weighted: fc.boolean(),
      }),
      fc.record({ algorithm: fc.constant("sliding-log" as const) }),
    ),
    limit: fc.integer({ min: 1, max: 4 }),
    sub: fc.integer({ min: 1, max: 50 }),
  })
  .chain(({ sliding, limit, sub }) => {
    const window = sub * ("buckets" in sliding ? sliding.buckets : 1);
    const spec: LimitSpec = { ...sliding, limit, window };
    const op = fc.record({
      kind: fc.constantFrom("consume", "consume", "consume", "consume", "consume", "peek", "refund"),
      dt: fc.oneof(
        { weight: 6, arbitrary: fc.integer({ min: 0, max: Math.ceil(window / 8) }) },
        { weight: 1, arbitrary: fc.integer({ min: 0, max: 3 * window }) },
      ),
      c: fc.oneof({ weight: 8, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 4 }) }),
    });
    const extra = fc.tuple(fc.oneof({ weight: 8, arbitrary: fc.constant(0) }, fc.integer({ min: 1, max: window })), fc.constant(null));
    return fc.tuple(
      fc.constant(spec),
      startArb,
      fc.array(op, { minLength: 60, maxLength: 60 }),
      fc.array(extra, { minLength: 60, maxLength: 60 }),
    );
  });

describe("memory store tables of one limit against the Evaluator", () => {
  it("sliding windows and logs knocked on while denied, with refunds and a clock that steps back", () => {
    fc.assert(fc.property(deniedScenario, check), { numRuns: 3_000 });
  });

  it("every algorithm and option, small numbers", () => {
    fc.assert(fc.property(scenario(anySpecArb), check), { numRuns: 1_500 });
  });

  it("every algorithm, realistic and extreme sizes", () => {
    fc.assert(fc.property(scenario(bigSpecArb), check), { numRuns: 500 });
  });
});
