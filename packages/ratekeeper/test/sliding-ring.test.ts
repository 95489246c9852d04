/**
 * The memory store decides a sliding window of several sub-windows through decideRing
 * (sliding-window.ts): decide() with its common case (a time in the newest sub-window written, on
 * a memory state) written out small. It must give exactly what decide() gives, every wait
 * included, and leave the same state (the ring, its total slot and the kept slot in `b`), over
 * any history: consumes, checks then commits, refunds, clocks stepping back and jumping ahead.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decide, decideRing, slidingWindow } from "../src/core/algorithms/sliding-window.js";
import type { LimitState } from "../src/core/algorithms/types.js";
import { newOutcome } from "../src/core/decision.js";
import { resolveLimit } from "../src/index.js";

const opArb = fc.record({
  kind: fc.constantFrom("consume", "consume", "consume", "check-commit", "refund"),
  // in sub-windows: mostly within one, sometimes stepping back or jumping over several
  dt: fc.oneof(fc.double({ min: -0.3, max: 0.6, noNaN: true }), fc.double({ min: -3, max: 14, noNaN: true })),
  cost: fc.double({ min: 0, max: 1, noNaN: true }),
});

function snapshot(s: LimitState): { a: number; b: number; ring: number[] } {
  return { a: s.a, b: s.b, ring: [...(s.ring as Float64Array)] };
}

describe("sliding window, several sub-windows: decideRing = decide()", () => {
  it("gives the same outcome and leaves the same state over any history", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 12 }),
        fc.constantFrom(1, 2, 3, 7, 60, 1000),
        fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constant(1_000_000)),
        fc.boolean(),
        fc.integer({ min: 0, max: 40 }),
        fc.array(opArb, { minLength: 1, maxLength: 80 }),
        (buckets, subMs, limit, weighted, start, ops) => {
          const lim = resolveLimit({ algorithm: "sliding-window", limit, window: buckets * subMs, buckets, weighted });
          const fast = slidingWindow.init(lim);
          const walk = slidingWindow.init(lim);
          const got = newOutcome();
          const want = newOutcome();
          let t = start * subMs;
          ops.forEach((op, k) => {
            t = Math.max(0, t + Math.round(op.dt * subMs));
            // costs from 1 to the whole limit, most of them small
            const cost = Math.max(1, Math.min(limit, Math.ceil(limit * op.cost ** 4)));
            const step = `step ${k} (${op.kind} ${cost} at ${t})`;
            if (op.kind === "consume") {
              decideRing(fast, t, cost, lim, got);
              decide(walk, t, cost, lim, want, true);
              expect(got, step).toEqual(want);
            } else
              for (const s of [fast, walk]) {
                if (op.kind === "refund") slidingWindow.refund(s, t, cost, lim);
                else {
                  slidingWindow.check(s, t, cost, lim, got);
                  if (got.allowed) slidingWindow.commit(s, t, cost, lim);
                }
              }
            expect(snapshot(fast), step).toEqual(snapshot(walk));
          });
        },
      ),
      { numRuns: 5_000 },
    );
  });

  it("a worked example: 10 per 10 s in sub-windows of 1 s, flooded, then denied until the oldest units leave", () => {
    const lim = resolveLimit({ algorithm: "sliding-window", limit: 10, window: 10_000, buckets: 10, weighted: false });
    const s = slidingWindow.init(lim);
    const o = newOutcome();
    for (let k = 0; k < 10; k++) decideRing(s, 20_000 + 500 * k, 1, lim, o); // two units a second, 20 s to 24.5 s
    expect(o).toMatchObject({ allowed: true, remaining: 0 });
    decideRing(s, 24_700, 1, lim, o);
    // The first two units (sub-window 20) leave when sub-window 30 starts, 5.3 s on; all ten once sub-window 24 has left.
    expect(o).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 5_300, resetAfterMs: 9_300 });
  });
});
