/**
 * The sliding log's stand-in for units that left its ring (sliding-log.ts: -Infinity, written by
 * refunds and grows; a finite stand-in, tried on 2026-11-27 with rings as JS arrays, was reverted
 * with them, and these tests hold either) and the memory rebase's shift of log times. The
 * stand-in must count as outside the window in every later decision, also on the window's exact
 * edge, with clocks that step back, refunds right after a grow or a wrap, costs up to the limit,
 * windows of 1 ms, times near 0 and below, and near 2^53. Each decision is held to a reference
 * that keeps every admitted unit's time, decides as at the high-water mark while it holds units
 * (as sliding-log.ts's top comment says the log does), and finds retryAfterMs by trying every
 * time a unit leaves (times are whole ms, as the store's are: with fractions that "earliest time"
 * would depend on rounding); a peek must leave the state exactly as it was.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { slidingLog } from "../src/core/algorithms/sliding-log.js";
import type { LimitState } from "../src/core/algorithms/types.js";
import { newOutcome } from "../src/core/decision.js";
import { MemoryStore, RateLimiter, resolveLimit } from "../src/index.js";
import { REBASE_AT } from "../src/stores/memory-rebase.js";

/** Every admitted unit's time; `exp`: when a memory store forgets the key (its TTL, high + window). */
class Ref {
  times: number[] = [];
  high = -Infinity;
  constructor(
    readonly L: number,
    readonly W: number,
  ) {}
  private at = (now: number) => (this.times.length > 0 ? Math.max(now, this.high) : now);
  private count = (T: number) => this.times.filter((u) => u > T - this.W && u <= T).length;
  decide(now: number, c: number): { allowed: boolean; remaining: number; retryAfterMs: number } {
    const t = this.at(now);
    const inside = this.count(t);
    if (inside + c <= this.L) return { allowed: true, remaining: this.L - inside - c, retryAfterMs: 0 };
    // The earliest time from t on at which c more units fit: some unit has just left then.
    const when = this.times.map((u) => u + this.W).filter((T) => T >= t && this.count(T) + c <= this.L);
    return { allowed: false, remaining: this.L - inside, retryAfterMs: Math.min(...when) - now };
  }
  commit(now: number, c: number): void {
    this.high = this.at(now);
    for (let i = 0; i < c; i++) this.times.push(this.high);
  }
  /** The newest units (at most a limit's worth) did not happen; the high-water mark stays. */
  refund(c: number): void {
    this.times.length -= Math.min(c, this.L, this.times.length);
  }
  get exp(): number {
    return this.high + this.W;
  }
}

type Op = { kind: "consume" | "peek" | "refund" | "check-commit"; dt: number; c: number };

const opsArb = (L: number, W: number, maxLen: number): fc.Arbitrary<Op[]> =>
  fc.array(
    fc.record({
      kind: fc.constantFrom<Op["kind"]>("consume", "consume", "consume", "peek", "refund", "refund", "check-commit"),
      dt: fc.oneof(
        { weight: 8, arbitrary: fc.integer({ min: 0, max: 1 }) },
        { weight: 4, arbitrary: fc.constantFrom(W - 1, W, W + 1) }, // onto the window's exact edge
        { weight: 2, arbitrary: fc.integer({ min: 1, max: 3 * W }) },
        { weight: 3, arbitrary: fc.integer({ min: -2 * W, max: -1 }) }, // the clock steps back
      ),
      c: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.constant(L) }, fc.integer({ min: 1, max: L })),
    }),
    { minLength: 1, maxLength: maxLen },
  );

/** Limits 1-20 (rings of up to 7 units wrap; above 7 they also grow, past 15 over units that left), windows 1-12 ms. */
const specArb = fc.record({
  L: fc.oneof(fc.constantFrom(1, 2, 7, 8, 16, 20), fc.integer({ min: 1, max: 20 })),
  W: fc.oneof(fc.constantFrom(1, 2), fc.integer({ min: 1, max: 12 })),
  t0: fc.constantFrom(0, 3, -40, 2 ** 53 - 10_000, 2 ** 40),
});

/** Runs `ops` on the core algorithm and the reference side by side. */
function coreAgrees(L: number, W: number, t0: number, ops: readonly Op[]): void {
  const lim = resolveLimit({ algorithm: "sliding-log", limit: L, window: W });
  const s: LimitState = slidingLog.init(lim);
  const ref = new Ref(L, W);
  const out = newOutcome();
  let now = t0;
  for (const [i, op] of ops.entries()) {
    now = Math.min(now + op.dt, Number.MAX_SAFE_INTEGER);
    const where = `op ${i} ${op.kind} c=${op.c} at ${now - t0}`;
    if (op.kind === "refund") {
      slidingLog.refund(s, now, op.c, lim);
      ref.refund(op.c);
      continue;
    }
    const before = JSON.stringify(s);
    if (op.kind === "consume") slidingLog.consume(s, now, op.c, lim, out);
    else slidingLog.check(s, now, op.c, lim, out);
    const want = ref.decide(now, op.c);
    expect({ allowed: out.allowed, remaining: out.remaining, retryAfterMs: out.retryAfterMs }, where).toEqual(want);
    if (op.kind === "peek" || !out.allowed) expect(JSON.stringify(s), where).toBe(before);
    if (op.kind === "check-commit" && out.allowed) slidingLog.commit(s, now, op.c, lim);
    if (out.allowed && op.kind !== "peek") ref.commit(now, op.c);
  }
}

describe("sliding log: the stand-in for units that left the ring counts as outside, exactly", () => {
  it("core: decides as the reference through wraps, grows, refunds, steps back, exact edges (also near 0, below 0, near 2^53)", () => {
    fc.assert(
      fc.property(
        specArb.chain((sp) => fc.tuple(fc.constant(sp), opsArb(sp.L, sp.W, 200))),
        ([{ L, W, t0 }, ops]) => coreAgrees(L, W, t0, ops),
      ),
      { numRuns: 1500 },
    );
  });

  const cases: Array<[string, number, number, number, Op[]]> = [
    // Limit 1, window 1: every unit leaves the ring of one slot; a refund puts the stand-in
    // (high - W = the cutoff exactly) back, and a step back still decides as at the high mark.
    ["limit 1, 1 ms", 1, 1, 0, [c(0), c(1), c(1), r(1), p(-1), c(0), c(0), r(1), c(1)]],
    // Units overwritten at the window's exact edge, then a refund of the newest: the stand-in
    // sits on the edge of the next decision at the high-water mark (clock stepped back).
    ["edge after wrap", 3, 5, 100, [c(0, 3), c(5, 3), r(3), p(-2, 3), c(0, 3), r(1), c(-4), p(0, 3)]],
    // Limit 8 grows from 7 slots over units that left: grow writes stand-ins, then refunds.
    ["refund after grow", 8, 4, 10, [c(0, 7), c(4, 7), c(0, 1), r(8), p(-3, 8), c(0, 8), r(8), p(1, 8)]],
    // A ring of 7 full of units inside grows to 15 over one that left (at the cutoff exactly):
    // grow writes the stand-in at the position just before the hint, which the next decision reads.
    ["grow over a unit that left", 20, 10, 0, [c(0), c(10, 7), c(0), p(0), p(-5, 12), c(0, 12), p(0)]],
    ["grow over a unit that left, times below 0", 20, 10, -100, [c(0), c(10, 7), c(0), p(0), p(-5, 12), c(0, 12), p(0)]],
    // Times near 0 and below: the stand-in (high - W) is negative.
    ["negative stand-in", 2, 10, -5, [c(0, 2), c(10, 2), r(2), p(-9, 2), c(0, 1), r(1), c(0, 2)]],
    // Near 2^53: high - W and t - W exact.
    ["near 2^53", 2, 3, 2 ** 53 - 20, [c(0, 2), c(3, 2), c(3, 2), r(2), p(-1, 2), c(0, 2), r(1), p(0, 2)]],
  ];
  it.each(cases)("targeted: %s", (_name, L, W, t0, ops) => coreAgrees(L, W, t0, ops));
});

function c(dt: number, cost = 1): Op {
  return { kind: "consume", dt, c: cost };
}
function p(dt: number, cost = 1): Op {
  return { kind: "peek", dt, c: cost };
}
function r(cost: number): Op {
  return { kind: "refund", dt: 0, c: cost };
}

describe("sliding log through RateLimiter + MemoryStore (injected clock, relative times, rebases)", () => {
  it("a rebase raises a unit on the window's edge to the edge, not past it (steps back to the high-water mark)", async () => {
    // A unit every half window (W = 4.6 days): at S, the units at S - W/2 and S count and the
    // one at S - W sits exactly on the edge (the key stays live: its TTL is S + W). Readings
    // later in the half window (some cross a rebase, about 20 in all) are each followed by a
    // step back to S, decided as at S: two units inside, room for one more.
    const W = 400_000_000;
    const T0 = 1.7e12;
    let now = T0;
    const limiter = new RateLimiter({
      limits: [{ algorithm: "sliding-log", limit: 3, window: W }],
      store: new MemoryStore({ sweepIntervalMs: 0 }),
      clock: () => now,
    });
    for (let m = 0; m < 60; m++) {
      const S = T0 + (m * W) / 2;
      now = S;
      expect((await limiter.consume("k")).remaining).toBe(m === 0 ? 2 : 1); // the unit at S - W is outside
      for (let j = 1; j < 8; j++) {
        now = S + (j * W) / 16;
        await limiter.peek("k");
        now = S;
        const d = await limiter.peek("k");
        expect([d.allowed, d.remaining], `step ${m}, reading ${j}`).toEqual([true, m === 0 ? 1 : 0]);
      }
    }
  });

  it("decides as the reference, also across rebases that shift the log's times", async () => {
    const DAY = 86_400_000;
    const arb = fc
      .record({ L: fc.integer({ min: 1, max: 10 }), W: fc.constantFrom(1, 3, 1000, DAY, 30 * DAY), t0: fc.constantFrom(0, 1.7e12) })
      .chain((sp) =>
        fc.tuple(
          fc.constant(sp),
          opsArb(sp.L, sp.W, 60),
          fc.array(fc.nat(59), { maxLength: 3 }), // ops after which the clock jumps to just before a rebase
        ),
      );
    await fc.assert(
      fc.asyncProperty(arb, async ([{ L, W, t0 }, ops, jumps]) => {
        let now: number = t0;
        let newest: number = t0;
        const limiter = new RateLimiter({
          limits: [{ algorithm: "sliding-log", limit: L, window: W }],
          store: new MemoryStore({ sweepIntervalMs: 0 }),
          clock: () => now,
        });
        const ref = new Ref(L, W);
        for (const [i, op] of ops.entries()) {
          now = Math.max(0, now + op.dt + (jumps.includes(i) ? REBASE_AT - W : 0));
          // A table keeps exact a step back of nearly 2^30 ms from its newest reading (memory-time.ts).
          now = Math.max(now, newest - 2 ** 29);
          newest = Math.max(newest, now);
          const where = `op ${i} ${op.kind} c=${op.c} at ${now - t0}`;
          // The store forgets a key once its TTL has passed (a consume starts it afresh; a refund finds nothing).
          const gone = now >= ref.exp;
          if (op.kind === "refund") {
            await limiter.refund("k", op.c);
            if (!gone) ref.refund(op.c);
            continue;
          }
          if (gone && op.kind !== "peek") ref.times = [];
          const d = op.kind === "peek" ? await limiter.peek("k", op.c) : await limiter.consume("k", op.c);
          expect({ allowed: d.allowed, remaining: d.remaining, retryAfterMs: d.retryAfterMs }, where).toEqual(ref.decide(now, op.c));
          if (d.allowed && op.kind !== "peek") ref.commit(now, op.c);
        }
      }),
      { numRuns: 500 },
    );
  });
});
