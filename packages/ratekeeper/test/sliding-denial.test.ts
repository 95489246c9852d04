/**
 * A sliding window's denial says how long to wait: `retryAfterMs`, the earliest wait after which
 * the same request is admitted, and `resetAfterMs`, the earliest after which the whole limit is.
 * With several sub-windows these come from a walk over the sub-windows (denialWaits in
 * sliding-window.ts) that takes shortcuts. This test holds it to the definition, by brute force:
 * for every whole millisecond w from 0 on, would a check at `now + w` (nothing else happening)
 * admit `cost`, and the whole limit? States are generated as a key's history (or a Redis reply)
 * could leave them: sparse rings, with and without the memory store's total slot, and clocks
 * behind the newest sub-window, on it and several sub-windows ahead.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decide } from "../src/core/algorithms/sliding-window.js";
import type { LimitState } from "../src/core/algorithms/types.js";
import { newOutcome } from "../src/core/decision.js";
import { resolveLimit } from "../src/index.js";

const caseArb = fc
  .record({
    buckets: fc.integer({ min: 2, max: 12 }),
    subMs: fc.constantFrom(1, 2, 3, 7),
    limit: fc.integer({ min: 1, max: 20 }),
    weighted: fc.boolean(),
    a: fc.oneof(fc.integer({ min: 0, max: 14 }), fc.integer({ min: 1000, max: 2 ** 30 })),
    // Most slots empty, as under traffic that comes and goes; a full slot may hold the whole limit.
    slots: fc.array(fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 20 })), { minLength: 13, maxLength: 13 }),
    withTotal: fc.boolean(),
    // A memory state keeps the slot of sub-window a (plus 1) in b; others have b = 0.
    kept: fc.boolean(),
    ahead: fc.integer({ min: -2, max: 15 }),
    offset: fc.double({ min: 0, max: 1, noNaN: true }),
    cost: fc.integer({ min: 1, max: 20 }),
  })
  .map((c) => {
    const B = c.buckets;
    const lim = resolveLimit({ algorithm: "sliding-window", limit: c.limit, window: B * c.subMs, buckets: B, weighted: c.weighted });
    const M = B + 1;
    const ring = new Float64Array(c.withTotal ? M + 1 : M);
    // Sub-windows a - B .. a are valid; those before 0 were never written.
    for (let j = Math.max(0, c.a - B); j <= c.a; j++) ring[j % M] = c.slots[j % M] as number;
    if (c.withTotal) ring[M] = ring.subarray(0, M).reduce((x, y) => x + y, 0);
    const nowMs = Math.max(0, (c.a + c.ahead) * c.subMs + Math.floor(c.offset * (c.subMs - 1)));
    return { lim, state: { a: c.a, b: c.kept ? (c.a % M) + 1 : 0, ring }, nowMs, cost: Math.min(c.cost, c.limit) };
  });

function admits(state: LimitState, nowMs: number, cost: number, lim: ReturnType<typeof resolveLimit>): boolean {
  // Without the kept slot (b = 0): the search finds every slot by a modulo.
  const copy = { a: state.a, b: 0, ring: Float64Array.from(state.ring as Float64Array) };
  const out = newOutcome();
  decide(copy, nowMs, cost, lim, out, false);
  return out.allowed;
}

/** The earliest whole-millisecond wait after which `cost` is admitted (searched up to the window and more). */
function firstWait(state: LimitState, nowMs: number, cost: number, lim: ReturnType<typeof resolveLimit>): number {
  const bound = 3 * lim.windowMs + 4 * (lim.windowMs / lim.buckets);
  for (let w = 0; w <= bound; w++) if (admits(state, nowMs + w, cost, lim)) return w;
  throw new Error(`nothing admits ${cost} within ${bound} ms`);
}

describe("sliding window, several sub-windows: a denial's waits are the earliest that work", () => {
  it("retryAfterMs and resetAfterMs equal a millisecond-by-millisecond search", () => {
    fc.assert(
      fc.property(caseArb, ({ lim, state, nowMs, cost }) => {
        const out = newOutcome();
        decide({ a: state.a, b: state.b, ring: Float64Array.from(state.ring as Float64Array) }, nowMs, cost, lim, out, false);
        fc.pre(!out.allowed);
        expect(out.retryAfterMs).toBe(firstWait(state, nowMs, cost, lim));
        expect(out.resetAfterMs).toBe(firstWait(state, nowMs, lim.limit, lim));
      }),
      { numRuns: 4_000 },
    );
  });

  it("a memory state's kept slot (b) changes no outcome and no state, admissions and commits included", () => {
    fc.assert(
      fc.property(caseArb, fc.boolean(), ({ lim, state, nowMs, cost }, commit) => {
        const kept = { a: state.a, b: state.b, ring: Float64Array.from(state.ring as Float64Array) };
        const plain = { a: state.a, b: 0, ring: Float64Array.from(state.ring as Float64Array) };
        const got = newOutcome();
        const want = newOutcome();
        decide(kept, nowMs, cost, lim, got, commit);
        decide(plain, nowMs, cost, lim, want, commit);
        expect(got).toEqual(want);
        expect({ a: kept.a, ring: [...kept.ring] }).toEqual({ a: plain.a, ring: [...plain.ring] });
        // After an admission both keep the slot of the newest sub-window written.
        if (commit && got.allowed) expect([kept.b, plain.b]).toEqual([(kept.a % (lim.buckets + 1)) + 1, (kept.a % (lim.buckets + 1)) + 1]);
      }),
      { numRuns: 4_000 },
    );
  });

  it("a worked example: 10 per 10 s in 10 sub-windows, 6 admitted 4 s ago and 4 just now", () => {
    // Sub-windows of 1 s. At t = 10.5 s (sub-window 10, 0.5 s in), sub-window 6 holds 6 units and
    // sub-window 10 holds 4: 10 counted, so 1 more is refused until sub-window 6 starts leaving the
    // window, in sub-window 16, where it is partly counted (weighted) beside sub-window 10's 4:
    // 4 + floor(6 * (1000 - x) / 1000) <= 9 from x = 1 ms, i.e. at 16.001 s: a wait of 5,501 ms.
    // The whole limit is back once sub-window 10's 4 have left too: floor(4 * (1000 - x) / 1000)
    // = 0 from x = 751 ms of sub-window 20: 20.751 s, a wait of 10,251 ms.
    const lim = resolveLimit({ algorithm: "sliding-window", limit: 10, window: 10_000, buckets: 10 });
    const ring = new Float64Array(12);
    ring[6] = 6;
    ring[10 % 11] = 4;
    ring[11] = 10;
    const out = newOutcome();
    decide({ a: 10, b: 0, ring }, 10_500, 1, lim, out, false);
    expect(out).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 5_501, resetAfterMs: 10_251 });
  });
});
