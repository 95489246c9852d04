/**
 * Every algorithm, with every option, against its naive reference model (test/core-models.ts):
 * decisions equal where the algorithm is exact, the promised bound is never exceeded in any
 * window, and `check` (a peek, or a denial) never changes the state. Manual time only.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { bigSpecArb, opsArb, specArbs, startArb, windowOf } from "./arbitraries.js";
import { boundViolation, driver, runAgainstModel, snapshotOf } from "./core-models.js";
import { ALGORITHM_IMPLS } from "../src/core/algorithms/index.js";
import { resolveLimit, type LimitSpec } from "../src/index.js";
import { newOutcome } from "../src/core/decision.js";

const RUNS = 400;

function scenario(specArb: fc.Arbitrary<LimitSpec>, refunds: boolean) {
  return specArb.chain((spec) => fc.tuple(fc.constant(spec), startArb, opsArb(windowOf(spec), 40, refunds)));
}

describe.each(Object.keys(specArbs))("%s against its reference model", (name) => {
  const specArb = specArbs[name] as fc.Arbitrary<LimitSpec>;

  it("without refunds: decisions equal the model's; the bound holds; check changes nothing", () => {
    fc.assert(
      fc.property(scenario(specArb, false), ([spec, t0, ops]) => runAgainstModel(spec, t0, ops)),
      { numRuns: RUNS },
    );
  });

  it("with refunds: refunds give units back, and never let more than the bound through", () => {
    fc.assert(
      fc.property(scenario(specArb, true), ([spec, t0, ops]) => runAgainstModel(spec, t0, ops)),
      { numRuns: RUNS },
    );
  });

  it("a refund right after a consume restores the decisions the key would get without it", () => {
    fc.assert(
      fc.property(
        scenario(specArb, false),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 0, max: 3000 }),
        ([spec, t0, ops], cost, later) => {
          const d = driver(spec);
          const twin = driver(spec);
          let t = t0;
          for (const op of ops) {
            t += op.dt;
            const c = Math.min(op.c, d.lim.capacity);
            if (op.kind === "consume" && d.check(t, c).allowed) {
              d.commit(t, c);
              twin.commit(t, c);
            }
          }
          const c = Math.min(cost, d.lim.capacity);
          if (!d.check(t, c).allowed) return;
          d.commit(t, c);
          d.refund(t, c);
          // Both keys now answer alike, now and later, for every cost.
          for (const dt of [0, 1, later]) {
            for (let k = 1; k <= d.lim.capacity; k++) {
              expect(d.check(t + dt, k), `cost ${k} at +${dt}`).toEqual(twin.check(t + dt, k));
            }
          }
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe.each(Object.keys(specArbs))("%s: consume (the fused hot path) = check, then commit when allowed", (name) => {
  const specArb = specArbs[name] as fc.Arbitrary<LimitSpec>;

  it("same outcome and same state after every step, clocks stepping back included", () => {
    fc.assert(
      fc.property(
        scenario(specArb, true),
        fc.array(fc.integer({ min: -50, max: 0 }), { minLength: 40, maxLength: 40 }),
        ([spec, t0, ops], back) => {
          const lim = resolveLimit(spec);
          const alg = ALGORITHM_IMPLS[lim.algorithm];
          const fused = alg.init(lim);
          const split = alg.init(lim);
          let t = t0;
          ops.forEach((op, i) => {
            t += op.dt + (i % 5 === 4 ? (back[i] ?? 0) : 0);
            const c = Math.min(op.c, lim.capacity);
            if (op.kind === "refund") {
              alg.refund(fused, t, c, lim);
              alg.refund(split, t, c, lim);
              return;
            }
            const a = newOutcome();
            const b = newOutcome();
            alg.consume(fused, t, c, lim, a);
            alg.check(split, t, c, lim, b);
            if (b.allowed) alg.commit(split, t, c, lim);
            expect(a, `step ${i} at ${t}, cost ${c}`).toEqual(b);
            expect(snapshotOf(fused), `state after step ${i}`).toEqual(snapshotOf(split));
          });
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe("the token bucket, the leaky bucket (meter and queue) and GCRA are one state machine", () => {
  it("token-bucket(capacity C) = leaky-bucket police(capacity C) = leaky-bucket shape admissions = gcra(burst C-1)", () => {
    const arb = fc
      .record({
        limit: fc.integer({ min: 1, max: 6 }),
        window: fc.constantFrom(1, 3, 10, 60, 1000),
        capacity: fc.integer({ min: 1, max: 6 }),
      })
      .chain((p) => fc.tuple(fc.constant(p), startArb, opsArb(p.window, 40, true)));
    fc.assert(
      fc.property(arb, ([p, t0, ops]) => {
        const ds = [
          driver({ algorithm: "token-bucket", limit: p.limit, window: p.window, capacity: p.capacity }),
          driver({ algorithm: "leaky-bucket", limit: p.limit, window: p.window, capacity: p.capacity }),
          driver({ algorithm: "leaky-bucket", limit: p.limit, window: p.window, capacity: p.capacity, mode: "shape" }),
          driver({ algorithm: "gcra", limit: p.limit, window: p.window, burst: p.capacity - 1 }),
        ];
        let t = t0;
        for (const op of ops) {
          t += op.dt;
          const c = Math.min(op.c, p.capacity);
          if (op.kind === "refund") {
            for (const d of ds) d.refund(t, c);
            continue;
          }
          const outs = ds.map((d) => d.check(t, c));
          const first = outs[0];
          for (const o of outs) {
            expect({ ...o, delayMs: 0 }).toEqual({ ...first, delayMs: 0 });
          }
          if (op.kind === "consume" && first?.allowed) for (const d of ds) d.commit(t, c);
        }
      }),
      { numRuns: RUNS },
    );
  });
});

describe("the bounds are tight: the worst cases the docs describe happen", () => {
  it("fixed window admits 2 x limit across a boundary; sliding log never does", () => {
    const fixed = driver({ algorithm: "fixed-window", limit: 5, window: 60_000 });
    const log = driver({ algorithm: "sliding-log", limit: 5, window: 60_000 });
    const reqs: Array<{ t: number; c: number }> = [];
    for (const t of [59_999, 60_000]) {
      for (let i = 0; i < 5; i++) {
        expect(fixed.check(t, 1).allowed).toBe(true);
        fixed.commit(t, 1);
        reqs.push({ t, c: 1 });
      }
    }
    expect(boundViolation(fixed.lim, reqs)).toBeNull(); // 10 in 2 ms is within the fixed window's promise
    expect(boundViolation(log.lim, reqs)).not.toBeNull(); // and would break the log's
  });

  it("sliding window (either mode) can reach 2 x limit in a span of one window, at sub-window edges", () => {
    for (const weighted of [false, true]) {
      const d = driver({ algorithm: "sliding-window", limit: 10, window: 60_000, buckets: 4, weighted });
      const reqs: Array<{ t: number; c: number }> = [];
      // As many as fit at the last ms of sub-window 0, then at 74_998: 60_000 ms later than the
      // first burst, counted inclusively. Weighted, sub-window 0 then weighs floor(10 * 2 / 15_000) = 0.
      for (const t of [14_999, 74_998]) {
        while (d.check(t, 1).allowed) {
          d.commit(t, 1);
          reqs.push({ t, c: 1 });
        }
      }
      expect(reqs.length).toBe(20);
      expect(boundViolation(d.lim, reqs)).toBeNull(); // within the sliding window's promise (2 x limit)
      expect(boundViolation(driver({ algorithm: "sliding-log", limit: 10, window: 60_000 }).lim, reqs)).not.toBeNull();
    }
  });
});

describe("large limits, windows and costs stay exact (integer arithmetic near 2^53 is avoided by validation)", () => {
  it("decisions equal the model's with big numbers and costs up to the capacity", () => {
    fc.assert(
      fc.property(
        bigSpecArb.chain((spec) => {
          const cap = driver(spec).lim.capacity;
          const w = windowOf(spec);
          const ops = fc.array(
            fc.record({
              kind: fc.constantFrom("consume" as const, "consume" as const, "peek" as const, "refund" as const),
              dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: w }), fc.integer({ min: 0, max: Math.max(1, Math.floor(w / 1000)) })),
              c: fc.oneof(fc.integer({ min: 1, max: cap }), fc.constant(cap), fc.integer({ min: 1, max: Math.max(1, Math.ceil(cap / 3)) })),
            }),
            { minLength: 1, maxLength: 25 },
          );
          return fc.tuple(fc.constant(spec), startArb, ops);
        }),
        ([spec, t0, ops]) => runAgainstModel(spec, t0, ops),
      ),
      { numRuns: 300 },
    );
  });
});
