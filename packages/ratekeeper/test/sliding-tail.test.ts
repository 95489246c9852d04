/**
 * The sliding window with one sub-window (`buckets: 1`, the default) decides through its own
 * unrolled path (decideTail in sliding-window.ts). It must give exactly what the general walk
 * (`decide`, used for any number of sub-windows) gives: the same outcome, every wait included,
 * and the same state afterwards. States are generated directly, as a key left by any history (or
 * read back from Redis) could hold them, with clocks behind the newest sub-window, on it, and up
 * to several sub-windows ahead. With several sub-windows, the memory state also keeps the ring's
 * total in one extra slot, which must stay the sum of the others.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decide, slidingWindow } from "../src/core/algorithms/sliding-window.js";
import { PACKED_MAX_LIMIT } from "../src/core/algorithms/sliding-tail.js";
import type { LimitState } from "../src/core/algorithms/types.js";
import { newOutcome } from "../src/core/decision.js";
import { resolveLimit } from "../src/index.js";

const subMsArb = fc.constantFrom(1, 2, 3, 7, 60, 1000, 3_600_000);

/** A one-sub-window limit, a state it could hold, a clock reading near it, and a cost. */
const caseArb = fc
  .record({
    limit: fc.integer({ min: 1, max: 12 }),
    subMs: subMsArb,
    weighted: fc.boolean(),
    a: fc.oneof(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 2 ** 40 })),
    cur: fc.integer({ min: 0, max: 14 }),
    prev: fc.integer({ min: 0, max: 14 }),
    ahead: fc.integer({ min: -2, max: 4 }),
    offset: fc.double({ min: 0, max: 1, noNaN: true }),
    cost: fc.integer({ min: 1, max: 12 }),
  })
  .map((c) => {
    const lim = resolveLimit({ algorithm: "sliding-window", limit: c.limit, window: c.subMs, buckets: 1, weighted: c.weighted });
    // Keep a state's window index small enough that a * S stays an exact integer (validation
    // bounds real clocks far below that).
    const a = Math.min(c.a, Math.floor(2 ** 52 / c.subMs) - 8);
    const ring = new Array<number>(2).fill(0);
    ring[a % 2] = c.cur;
    ring[(a + 1) % 2] = a === 0 ? 0 : c.prev; // at a = 0 the other slot is sub-window -1: never written
    const nowMs = Math.max(0, (a + c.ahead) * c.subMs + Math.floor(c.offset * (c.subMs - 1)));
    return { lim, state: { a, b: 0, ring }, nowMs, cost: Math.min(c.cost, c.limit) };
  });

function copy(s: LimitState): LimitState {
  return { a: s.a, b: s.b, ring: [...(s.ring as number[])] };
}

describe("sliding window: the unrolled one-sub-window path = the general walk; the ring's total", () => {
  it("check and consume give the same outcome and leave the same state", () => {
    fc.assert(
      fc.property(caseArb, fc.boolean(), ({ lim, state, nowMs, cost }, commit) => {
        const fast = copy(state);
        const walk = copy(state);
        const got = newOutcome();
        const want = newOutcome();
        if (commit) slidingWindow.consume(fast, nowMs, cost, lim, got);
        else slidingWindow.check(fast, nowMs, cost, lim, got);
        decide(walk, nowMs, cost, lim, want, commit);
        expect(got).toEqual(want);
        expect({ a: fast.a, ring: [...(fast.ring as number[])] }).toEqual({ a: walk.a, ring: [...(walk.ring as number[])] });
      }),
      { numRuns: 20_000 },
    );
  });

  it("with several sub-windows, the memory state's extra slot keeps the sum of the others through consumes, commits, refunds and clocks stepping back", () => {
    const opArb = fc.record({
      kind: fc.constantFrom("consume", "check-commit", "refund", "peek"),
      dt: fc.integer({ min: -40, max: 120 }),
      cost: fc.integer({ min: 1, max: 6 }),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 12 }),
        fc.constantFrom(1, 3, 10),
        fc.integer({ min: 1, max: 20 }),
        fc.boolean(),
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        (buckets, subMs, limit, weighted, ops) => {
          const lim = resolveLimit({ algorithm: "sliding-window", limit, window: buckets * subMs, buckets, weighted });
          const s = slidingWindow.init(lim);
          const ring = s.ring as number[];
          expect(ring.length).toBe(buckets + 2);
          const out = newOutcome();
          let t = 1_000_000;
          for (const op of ops) {
            t = Math.max(0, t + op.dt);
            const cost = Math.min(op.cost, lim.capacity);
            if (op.kind === "consume") slidingWindow.consume(s, t, cost, lim, out);
            else if (op.kind === "refund") slidingWindow.refund(s, t, cost, lim);
            else {
              slidingWindow.check(s, t, cost, lim, out);
              if (op.kind === "check-commit" && out.allowed) slidingWindow.commit(s, t, cost, lim);
            }
            expect(ring[buckets + 1], `after ${op.kind} at ${t}`).toBe(ring.slice(0, buckets + 1).reduce((x, y) => x + y, 0));
          }
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it("a worked example: 10 per minute, 8 admitted in the previous minute and 4 in this one, 10 s in", () => {
    // ClassDojo's / Cloudflare's estimate: 4 + 8 * (60 - 10) / 60 = 10.67, rounded down to 10,
    // so a request is refused. It fits once floor(8 * (60 - x) / 60) <= 5, i.e. from x = 15.001 s:
    // 5.001 s on.
    const lim = resolveLimit({ algorithm: "sliding-window", limit: 10, window: 60_000 });
    const ring = new Array<number>(2).fill(0);
    ring[1] = 4; // sub-window 1 (this minute)
    ring[0] = 8; // sub-window 0 (the previous one)
    const out = newOutcome();
    slidingWindow.check({ a: 1, b: 0, ring }, 70_000, 1, lim, out);
    expect(out).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 5_001 });
    // The whole limit is back once this minute's 4 no longer count: in the next minute
    // floor(4 * (60 - x) / 60) = 0 from x = 60 - floor(59.999 / 4) = 45.001 s: 50 s + 45.001 s.
    expect(out.resetAfterMs).toBe(50_000 + 45_001);
  });
});

describe("sliding window, one sub-window: the memory state's two counts packed into the state", () => {
  it("a limit up to PACKED_MAX_LIMIT keeps its counts in the state itself (no ring); a larger limit, or several sub-windows, a ring", () => {
    const at = (limit: number, buckets: number) =>
      slidingWindow.init(resolveLimit({ algorithm: "sliding-window", limit, window: 60_000, buckets })).ring;
    expect(at(1, 1)).toBeNull();
    expect(at(PACKED_MAX_LIMIT, 1)).toBeNull();
    expect(Array.isArray(at(PACKED_MAX_LIMIT + 1, 1))).toBe(true);
    expect(Array.isArray(at(5, 2))).toBe(true);
  });

  it("decides and keeps its counts as the ring does: consumes, checks then commits, refunds, clocks stepping back and jumping ahead", () => {
    const opArb = fc.record({
      kind: fc.constantFrom("consume", "check-commit", "refund", "peek"),
      // in sub-windows: mostly within one, sometimes stepping back or jumping over several
      dt: fc.oneof(fc.double({ min: -0.3, max: 0.6, noNaN: true }), fc.double({ min: -2, max: 4, noNaN: true })),
      cost: fc.double({ min: 0, max: 1, noNaN: true }),
    });
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constant(PACKED_MAX_LIMIT)),
        subMsArb,
        fc.boolean(),
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        (limit, subMs, weighted, ops) => {
          const lim = resolveLimit({ algorithm: "sliding-window", limit, window: subMs, buckets: 1, weighted });
          const packed = slidingWindow.init(lim);
          const ringed: LimitState = { a: 0, b: 0, ring: new Array<number>(2).fill(0) };
          const got = newOutcome();
          const want = newOutcome();
          let t = 5 * subMs;
          ops.forEach((op, k) => {
            t = Math.max(0, t + Math.round(op.dt * subMs));
            // costs from 1 to the whole limit, most of them small
            const cost = Math.max(1, Math.min(limit, Math.ceil(limit * op.cost ** 4)));
            const step = `step ${k} (${op.kind} ${cost} at ${t})`;
            for (const [s, out] of [
              [packed, got],
              [ringed, want],
            ] as const) {
              if (op.kind === "consume") slidingWindow.consume(s, t, cost, lim, out);
              else if (op.kind === "refund") slidingWindow.refund(s, t, cost, lim);
              else {
                slidingWindow.check(s, t, cost, lim, out);
                if (op.kind === "check-commit" && out.allowed) slidingWindow.commit(s, t, cost, lim);
              }
            }
            expect(got, step).toEqual(want);
            expect(packed.a, step).toBe(ringed.a);
            // The counts themselves: what a check of the whole limit and of one unit sees, now and a sub-window later.
            for (const [dt, c] of [
              [0, 1],
              [0, limit],
              [subMs, limit],
            ] as const) {
              slidingWindow.check(packed, t + dt, c, lim, got);
              slidingWindow.check(ringed, t + dt, c, lim, want);
              expect(got, `${step}, then a check of ${c} at +${dt}`).toEqual(want);
            }
          });
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it("a refund takes nothing from a sub-window no longer counted, even when the clock later steps back to where it is", () => {
    // 3 units in sub-window 0, 1 in sub-window 1; a refund of 2 in sub-window 2 takes back the 1
    // (sub-window 0 no longer counts there). Back in sub-window 1, 100 ms in, sub-window 0 counts
    // floor(3 * 900 / 1000) = 2 units again: all 3 are still there.
    const lim = resolveLimit({ algorithm: "sliding-window", limit: 10, window: 1_000 });
    for (const s of [slidingWindow.init(lim), { a: 0, b: 0, ring: new Array<number>(2).fill(0) }]) {
      const out = newOutcome();
      slidingWindow.consume(s, 500, 3, lim, out);
      slidingWindow.consume(s, 1_500, 1, lim, out);
      slidingWindow.refund(s, 2_500, 2, lim);
      slidingWindow.check(s, 1_100, 1, lim, out);
      expect(out, s.ring === null ? "packed" : "ring").toMatchObject({ allowed: true, remaining: 7 });
    }
  });

  it("counts up to PACKED_MAX_LIMIT in both sub-windows keep their value", () => {
    const limit = PACKED_MAX_LIMIT;
    const lim = resolveLimit({ algorithm: "sliding-window", limit, window: 1_000 });
    const packed = slidingWindow.init(lim);
    const ringed: LimitState = { a: 0, b: 0, ring: new Array<number>(2).fill(0) };
    const got = newOutcome();
    const want = newOutcome();
    const both = (f: (s: LimitState, out: ReturnType<typeof newOutcome>) => void) => {
      f(packed, got);
      f(ringed, want);
      expect(got).toEqual(want);
    };
    both((s, out) => slidingWindow.consume(s, 900, limit, lim, out)); // sub-window 0: the whole limit
    // Half-way through sub-window 1, floor(32767 / 2) = 16383 units of sub-window 0 still count.
    both((s, out) => slidingWindow.consume(s, 1_500, limit - 16_383, lim, out));
    expect(got).toMatchObject({ allowed: true, remaining: 0 });
    for (const t of [1_500, 1_999, 2_000, 2_600, 2_999]) both((s, out) => slidingWindow.check(s, t, 1, lim, out));
    slidingWindow.refund(packed, 1_600, 100, lim);
    slidingWindow.refund(ringed, 1_600, 100, lim);
    for (const t of [1_600, 2_000, 2_600]) both((s, out) => slidingWindow.check(s, t, limit, lim, out));
  });
});
