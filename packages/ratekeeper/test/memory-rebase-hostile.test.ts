/**
 * Hostile tests of the memory store's rebase (stores/memory-rebase.ts), for what
 * memory-rebase.test.ts's property does not reach: stores with a small `maxKeys` (generations
 * turn every few keys, so keys move young -> old -> dropped around a rebase), `reset`, the
 * store's own sweep, refunds and peeks at the rebasing reading, shaping with `maxDelayMs`, the
 * sliding tables' remembered denial (DenialSlot) and SingleTable's last-key cache across a
 * rebase, jumps of years, clocks near the epoch.
 *
 * The oracle of the property: the same store code with the rebase turned off (a table whose base
 * stays 0, so its algorithms see absolute times: the table before relative time). Both tables get
 * the same ops; the rebasing one's own sweep (the rebase drops keys that expired 2^30 ms before
 * its reading) is mirrored into the reference at the same absolute time, so that both hold the
 * same keys and turn at the same moments. Every decision must then be the same.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Evaluator } from "../src/core/evaluate.js";
import { MemoryStore, resolveLimits, type BoundStore, type Decision, type LimitSpec } from "../src/index.js";
import { REBASE_AT } from "../src/stores/memory-rebase.js";
import { BEFORE_FIRST } from "../src/stores/memory-time.js";
import { rebaseSpecArb } from "./arbitraries.js";

const DAY = 86_400_000;
const YEAR = 365 * DAY;
const T0 = 1_764_236_401_237;

type Inner = { base: number; rebaseAt: number; held: number; sweep: (nowMs: number) => number };
const inner = (t: BoundStore) => t as unknown as Inner;

const specArb: fc.Arbitrary<LimitSpec> = fc.oneof(
  { weight: 8, arbitrary: rebaseSpecArb([7, 60, 1000, 60_000, 3_600_000, DAY - 1, DAY, 4 * DAY, 7 * DAY], 5, ["shape"]) },
  // Rebase periods at or just under 2^28 (the largest that rebases): the next rebase is then
  // spaced by its RETRY (2^27 ms after the reading) rather than REBASE_AT, and a sliding window's
  // reach (its window) holds the shift back by most of a period.
  {
    weight: 1,
    arbitrary: fc.constantFrom<LimitSpec>(
      { algorithm: "fixed-window", limit: 2, window: 2 ** 28 },
      { algorithm: "sliding-window", limit: 3, window: 2 * 89_478_485, buckets: 2 },
      { algorithm: "sliding-window", limit: 3, window: 2 ** 27, weighted: false },
    ),
  },
);

const opArb = fc.record({
  near: fc.oneof({ weight: 4, arbitrary: fc.constant(false) }, fc.constant(true)),
  key: fc.nat(5),
  kind: fc.constantFrom("consume", "consume", "consume", "consume", "peek", "refund", "reset", "sweep"),
  dt: fc.oneof(
    { weight: 3, arbitrary: fc.nat(20) },
    { weight: 3, arbitrary: fc.nat(DAY) },
    fc.integer({ min: DAY, max: 9 * DAY }),
    fc.integer({ min: YEAR, max: 3 * YEAR }),
  ),
  back: fc.oneof(
    { weight: 6, arbitrary: fc.constant(0) },
    fc.nat(2_000),
    fc.nat(3 * DAY),
    fc.integer({ min: BEFORE_FIRST - DAY, max: BEFORE_FIRST }),
  ),
  c: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 3 })),
  maxDelay: fc.option(fc.nat(5_000), { nil: undefined }),
});
type Op = { near: boolean; key: number; kind: string; dt: number; back: number; c: number; maxDelay: number | undefined };

const startArb = fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: T0, max: T0 + 30 * DAY }));

/**
 * Two tables of `specs` in stores of `maxKeys`: the real one, and one whose rebase is off (base 0
 * for good); and the sweeps the real one made (its rebase's, before it looked up the key), which
 * the caller applies to the reference before the same op.
 */
function pair(specs: LimitSpec[], maxKeys: number): [BoundStore, BoundStore, MemoryStore, MemoryStore, number[]] {
  const limits = resolveLimits(specs);
  const store = new MemoryStore({ maxKeys, sweepIntervalMs: 0 });
  const refStore = new MemoryStore({ maxKeys, sweepIntervalMs: 0 });
  const table = store.bind(limits, "hostile");
  const ref = refStore.bind(limits, "hostile");
  inner(ref).rebaseAt = Number.POSITIVE_INFINITY;
  const own = inner(table).sweep.bind(table);
  const swept: number[] = [];
  inner(table).sweep = (nowMs: number) => {
    swept.push(nowMs);
    return own(nowMs);
  };
  return [table, ref, store, refStore, swept];
}

let rebases = 0;

function differential([specs, maxKeys, t0, ops]: [LimitSpec[], number, number, Op[]]) {
  const [table, ref, store, refStore, swept] = pair(specs, maxKeys);
  /** The real table's op first, then its sweeps on the reference, then the reference's op. */
  const both = <T>(real: () => T, reference: () => T): [T, T] => {
    swept.length = 0;
    const got = real();
    for (const x of swept) inner(ref).sweep(x);
    return [got, reference()];
  };
  const capacity = Math.min(...resolveLimits(specs).map((l) => l.capacity));
  let t = t0;
  let newest = t0;
  let base = -1;
  ops.forEach((op, i) => {
    const next = inner(table).base + inner(table).rebaseAt;
    if (op.near && Number.isFinite(next) && next > t) t = next - (op.dt % 3_000);
    t = Math.max(0, t + op.dt - op.back, newest - BEFORE_FIRST);
    newest = Math.max(newest, t);
    const key = `k${op.key}`;
    const c = Math.min(op.c, capacity);
    const at = `op ${i}: ${op.kind} ${key} c${c} at ${t} (start ${t0}, base ${inner(table).base})`;
    if (op.kind === "consume") {
      const [got, want] = both(
        () => table.consume(key, c, t, op.maxDelay) as Decision,
        () => ref.consume(key, c, t, op.maxDelay) as Decision,
      );
      expect(got, at).toEqual(want);
    } else if (op.kind === "peek") {
      const [got, want] = both(
        () => table.peek(key, c, t) as Decision,
        () => ref.peek(key, c, t) as Decision,
      );
      expect(got, at).toEqual(want);
    } else if (op.kind === "refund")
      both(
        () => void table.refund(key, c, t),
        () => void ref.refund(key, c, t),
      );
    else if (op.kind === "reset")
      both(
        () => void table.reset(key),
        () => void ref.reset(key),
      );
    else
      both(
        () => store.sweep(t - op.back),
        () => refStore.sweep(t - op.back),
      );
    // A rebase drops only keys that expired 2^30 ms before its reading (the newest): no reading
    // the table promises to decide exactly could still find them live.
    if (op.kind !== "sweep") for (const x of swept) expect(x, at).toBeLessThanOrEqual(newest - BEFORE_FIRST);
    expect(inner(table).held, at).toBe(inner(ref).held);
    if (base >= 0 && inner(table).base !== base) rebases++;
    base = inner(table).base;
  });
}

describe("memory store rebase, hostile: the same store with the rebase off decides the same", () => {
  it("small maxKeys (turns every few keys), reset, sweeps, refunds, peeks, shaping with maxDelayMs, jumps of years", () => {
    rebases = 0;
    const arb = fc.tuple(
      fc.array(specArb, { minLength: 1, maxLength: 3 }),
      fc.integer({ min: 2, max: 8 }),
      startArb,
      fc.array(opArb, { minLength: 10, maxLength: 60 }),
    );
    fc.assert(fc.property(arb, differential), { numRuns: Number(process.env.HOSTILE_RUNS ?? 3_000) });
    // About 11,000 base moves in 3,000 runs; 1,500 even with the rebase off after the first (base
    // 0 at a clock near the epoch, then the first rebase), so the bound is well above that.
    expect(rebases).toBeGreaterThan(Number(process.env.HOSTILE_RUNS ?? 3_000) * 2);
  });
});

/**
 * The Evaluator on absolute time for one key, with the store's expiry written out (as
 * memory-rebase.test.ts's model): a reading at or after the key's expiry finds a fresh state,
 * also when a later reading steps back before that expiry (the store cleared the key by then).
 */
function evaluator(specs: LimitSpec[]) {
  const ev = new Evaluator(resolveLimits(specs));
  let st = ev.init();
  let exp = Number.NEGATIVE_INFINITY;
  return (t: number, cost: number, commit = true) => {
    // Expired: a consume clears the key's state, a peek reads a fresh one and changes nothing.
    if (t >= exp && commit) st = ev.init();
    const d = ev.run(t >= exp && !commit ? ev.init() : st, t, cost, commit);
    if (commit && d.allowed) exp = t + ev.ttlMs;
    return d;
  };
}

describe("memory store rebase, hostile: targeted", () => {
  it("a sliding table's remembered denial survives a rebase, and is still right when asked again before its retry", () => {
    for (const spec of [
      { algorithm: "sliding-log", limit: 2, window: 2 * DAY },
      { algorithm: "sliding-window", limit: 2, window: 2 * DAY, buckets: 4 }, // period 2.5 days: it rebases
    ] as LimitSpec[]) {
      const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits([spec]), "denial");
      const want = evaluator([spec]);
      const t1 = T0;
      void table.consume("other", 1, t1); // sets the base 2^30 ms before t1
      const rebaseAbs = inner(table).base + REBASE_AT + 1;
      // Key k fills its window a day before the rebase, and is denied (remembered) just before it.
      const ta = rebaseAbs - DAY;
      for (const t of [ta, ta + 1, ta + 2, rebaseAbs - 5, rebaseAbs - 1]) expect(table.consume("k", 1, t), `${t}`).toEqual(want(t, 1));
      const slot = () => (inner(table) as unknown as { young: { get(k: string): { retryBeforeExp: number } } }).young.get("k");
      expect(slot()?.retryBeforeExp).toBeGreaterThanOrEqual(0);
      const before = inner(table).base;
      // The rebase: on another key, then k asked again (its denial is answered from the slot), also stepped back.
      void table.consume("other", 1, rebaseAbs);
      expect(inner(table).base).toBeGreaterThan(before);
      expect(slot()?.retryBeforeExp).toBeGreaterThanOrEqual(0);
      for (const t of [rebaseAbs + 1, rebaseAbs - 3 * DAY, rebaseAbs + DAY, ta + 2 * DAY - 1, ta + 2 * DAY, ta + 2 * DAY + 2])
        expect(table.consume("k", 1, t), `${t}`).toEqual(want(t, 1));
    }
  });

  it("the last-key cache: a key that expired and is decided again at the reading that rebases, then after another key", () => {
    for (const spec of [
      { algorithm: "fixed-window", limit: 2, window: 1_000 },
      { algorithm: "sliding-window", limit: 2, window: 1_000 },
      { algorithm: "sliding-log", limit: 2, window: 1_000 },
      // burst 1: a capacity of 2, the cost asked below (a larger cost is refused: store-cost-over-capacity.test.ts).
      { algorithm: "gcra", limit: 2, window: 1_000, burst: 1 },
    ] as LimitSpec[]) {
      const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits([spec]), "cache");
      void table.consume("k", 1, T0); // base; k cached, it expires a second later
      const rebaseAbs = inner(table).base + REBASE_AT + 1;
      const before = inner(table).base;
      // The reading that rebases is k's own: the rebase drops k's slot (expired), so k must get a new one.
      const want = evaluator([spec]);
      expect(table.consume("k", 2, rebaseAbs)).toEqual(want(rebaseAbs, 2));
      expect(inner(table).base).toBeGreaterThan(before);
      expect(inner(table).held).toBe(1);
      void table.consume("x", 1, rebaseAbs + 1);
      // k's two units are still there: found again by its key, not through the cache.
      expect(table.consume("k", 1, rebaseAbs + 2)).toEqual(want(rebaseAbs + 2, 1));
      expect(table.peek("k", 1, rebaseAbs + 3)).toEqual(want(rebaseAbs + 3, 1, false));
    }
  });

  it("a refund and a peek at the reading that rebases, and a reset of a key the rebase shifted", () => {
    const specs: LimitSpec[] = [
      { algorithm: "sliding-window", limit: 4, window: 2 * DAY, buckets: 4 },
      { algorithm: "token-bucket", limit: 4, window: 2 * DAY },
    ];
    for (const first of ["refund", "peek"]) {
      const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits(specs), "refund");
      const want = evaluator(specs);
      void table.consume("other", 1, T0);
      const rebaseAbs = inner(table).base + REBASE_AT + 1;
      const ta = rebaseAbs - 2 * DAY;
      for (let j = 0; j < 4; j++) expect(table.consume("k", 1, ta + j)).toEqual(want(ta + j, 1));
      const before = inner(table).base;
      if (first === "refund") {
        void table.refund("k", 2, rebaseAbs); // this reading rebases
      } else expect(table.peek("k", 1, rebaseAbs)).toEqual(want(rebaseAbs, 1, false));
      expect(inner(table).base).toBeGreaterThan(before);
      if (first === "refund") {
        // Refund on the reference: the Evaluator's own refund at the same absolute time.
        const ev = new Evaluator(resolveLimits(specs));
        const st = ev.init();
        for (let j = 0; j < 4; j++) ev.run(st, ta + j, 1, true);
        ev.refund(st, rebaseAbs, 2);
        for (const t of [rebaseAbs + 1, rebaseAbs - DAY, rebaseAbs + DAY])
          expect(table.consume("k", 1, t), `${t}`).toEqual(ev.run(st, t, 1, true));
      } else {
        for (const t of [rebaseAbs + 1, rebaseAbs - DAY]) expect(table.consume("k", 1, t), `${t}`).toEqual(want(t, 1));
      }
      void table.reset("k");
      const fresh = evaluator(specs);
      expect(table.consume("k", 4, rebaseAbs + 5)).toEqual(fresh(rebaseAbs + 5, 4));
    }
  });

  it("a one-sub-window window above 32,767 units (a ring of two counts, slot a mod 2) whose newest sub-window shifts to -1", () => {
    // S = 1 day: a rebase moves by a multiple of 2S; a key written in the sub-window just before
    // the new base is kept (it counts until a sub-window later) at a = -1, whose slot `-1 & 1`
    // must still be its own. The cut moves against the period in steps of 3 hours.
    const spec: LimitSpec = { algorithm: "sliding-window", limit: 40_000, window: DAY };
    const S = DAY;
    let sawMinusOne = 0;
    for (let late = 1; late < 2 * S; late += 3 * 3_600_000) {
      const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits([spec]), "tail");
      const want = evaluator([spec]);
      void table.consume("other", 1, T0);
      const base0 = inner(table).base;
      const rebaseAbs = base0 + REBASE_AT + late;
      const cutAbs = rebaseAbs - BEFORE_FIRST;
      const newBase = base0 + Math.floor((cutAbs - base0) / (2 * S)) * 2 * S;
      const tk = newBase - 5_000; // the last seconds of sub-window -1 after the rebase
      expect(table.consume("k", 39_000, tk)).toEqual(want(tk, 39_000));
      expect(table.consume("k", 900, tk + 500)).toEqual(want(tk + 500, 900));
      void table.consume("other", 1, rebaseAbs);
      expect(inner(table).base).toBe(newBase);
      const st = inner(table) as unknown as {
        old: { get(k: string): { a: number } | undefined };
        young: { get(k: string): { a: number } | undefined };
      };
      if ((st.young.get("k") ?? st.old.get("k"))?.a === -1) sawMinusOne++;
      for (const t of [Math.max(cutAbs, tk + 600), cutAbs + 1, newBase + 1, newBase + S / 2, newBase + S - 1, newBase + S + 7])
        if (t >= tk + 500) expect(table.consume("k", 200, t), `${late} ${t}`).toEqual(want(t, 200));
    }
    expect(sawMinusOne).toBeGreaterThan(3);
  });

  it("a rebase period just under 2^28: the next rebase is spaced by RETRY, decisions stay right, times stay below 2^31", () => {
    // Period 3S = 268,435,455 ms and reach 2S: after a rebase the reading may lie more than
    // REBASE_AT - 2^27 after the new base, so the next threshold is the reading plus 2^27.
    const specs: LimitSpec[] = [{ algorithm: "sliding-window", limit: 3, window: 2 * 89_478_485, buckets: 2 }];
    const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits(specs), "retry");
    const want = evaluator(specs);
    let retried = 0;
    let moves = 0;
    let base = -1;
    // Readings every hour; every other threshold is crossed by a jump to 160,000,000 ms past it
    // (between 2^27 and the sub-window's 2S after it, the shift is still one period, so the
    // reading after it lies more than REBASE_AT - 2^27 after the new base).
    let t = T0;
    for (let i = 0; i < 2_000; i++) {
      const next = inner(table).base + inner(table).rebaseAt;
      t = i > 0 && next <= t + 3_600_000 && moves % 2 === 0 ? next + 160_000_000 : t + 3_600_000 + (i % 7);
      const at = i % 9 === 0 ? t - 40_000_000 : t;
      expect(table.consume("k", 1, at), `step ${i} at ${at}`).toEqual(want(at, 1));
      expect(t - inner(table).base).toBeLessThan(2 ** 31);
      if (inner(table).rebaseAt > REBASE_AT) retried++;
      if (base >= 0 && inner(table).base !== base) moves++;
      base = inner(table).base;
    }
    expect(moves).toBeGreaterThanOrEqual(5);
    expect(retried).toBeGreaterThan(0);
  });

  it("clocks near the epoch (base 0) that run past 18.6 days, and a jump of years, with a key live across each rebase", () => {
    const specs: LimitSpec[] = [
      { algorithm: "sliding-log", limit: 3, window: 2 * DAY },
      { algorithm: "gcra", limit: 3, window: DAY, burst: 2 },
    ];
    const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits(specs), "epoch");
    const want = evaluator(specs);
    let t = 5;
    let moves = 0;
    let base = inner(table).base;
    for (let i = 0; i < 400; i++) {
      t += i === 200 ? 3 * YEAR : 7 * 3_600_000 + (i % 5);
      const back = i % 11 === 0 ? DAY : 0;
      expect(table.consume("k", 1, t - back), `step ${i} at ${t - back}`).toEqual(want(t - back, 1));
      if (inner(table).base !== base) moves++;
      base = inner(table).base;
    }
    expect(moves).toBeGreaterThanOrEqual(10);
  });
});
