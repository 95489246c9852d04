/**
 * The rebase of a memory table's relative time (memory-time.ts says why times are relative, why
 * a rebase keeps every decision, and its limits): when a reading lies more than
 * {@link REBASE_AT} after the table's base, the base moves forward by `D`, a multiple of
 * {@link rebasePeriod}, and every time kept in a key's state moves back by `D`. Here: the
 * period, the amount, and the shift of one state per algorithm.
 */
import { gcd } from "../core/arith.js";
import type { LimitState } from "../core/algorithms/index.js";
import { PACKED_MAX_LIMIT } from "../core/algorithms/sliding-tail.js";
import type { ResolvedLimit } from "../core/options.js";
import type { KeyIndex } from "./key-index.js";
import { relTime } from "./memory-time.js";

/**
 * A reading this far after the base (ms; 1.5 x 2^30, 18.6 days) rebases first. Times kept stay
 * below 2^31 (a Smi) while a key's state matters for less than the 2^29 ms (6.2 days) left.
 */
export const REBASE_AT = 2 ** 30 + 2 ** 29;

/** The longest period (ms) a rebase moves by whole multiples of: 2^28, 3.1 days (see nextRebase). */
export const MAX_REBASE_PERIOD = 2 ** 28;

/** The least time between two passes over a table's keys (ms; see nextRebase). */
const RETRY = 2 ** 27;

/**
 * What a shift of `lim`'s state must be a multiple of (ms) so that it decides the same: the
 * clock-aligned fixed window's window (its floor by `windowMs`); a sliding window's sub-window
 * `S` times the ring's slots, `buckets + 1` (sub-window `i` lives in slot `i mod (buckets + 1)`,
 * and `b` names a slot), or `S` alone when its two counts are packed into `b` (no ring); 1 for
 * the others (they read differences of times, and the sliding log's `a` and `b` are positions).
 */
export function rebasePeriodOf(lim: ResolvedLimit): number {
  if (lim.algorithm === "fixed-window") return lim.alignFirst ? 1 : lim.windowMs;
  if (lim.algorithm !== "sliding-window") return 1;
  const S = lim.windowMs / lim.buckets;
  return lim.buckets === 1 && lim.limit <= PACKED_MAX_LIMIT ? S : S * (lim.buckets + 1);
}

/** The least common multiple of every limit's {@link rebasePeriodOf}; 0 when above {@link MAX_REBASE_PERIOD}. */
export function rebasePeriod(limits: readonly ResolvedLimit[]): number {
  let p = 1;
  for (const l of limits) {
    const q = rebasePeriodOf(l);
    p = (p / gcd(p, q)) * q;
    if (p > MAX_REBASE_PERIOD) return 0;
  }
  return p;
}

/**
 * The table's `rebaseAt` after a rebase that left the newest reading `rel` after the base:
 * {@link REBASE_AT}, or RETRY after `rel` if that is later (only with periods near the largest),
 * so that passes over the keys are never closer than that; never for a table whose period is
 * too long. Why the base moves at all: the trigger is `rel > REBASE_AT`, so `cut = rel - 2^30 >
 * 2^29`, and `cut - reach > 2^29 - P >= P` (reach < P <= 2^28), so `D >= P`; after it `rel - D <
 * 2^30 + reach + P < REBASE_AT` (`D` is within `P` of `cut - reach`).
 */
export function nextRebase(limits: readonly ResolvedLimit[], rel: number): number {
  if (rebasePeriod(limits) === 0) return Number.POSITIVE_INFINITY;
  return Math.max(REBASE_AT, rel + RETRY);
}

/**
 * How far before `cut` a limit's state may still hold units that count at a reading at or after
 * `cut` (ms): a sliding window of several sub-windows counts sub-windows from `floor(t / S) -
 * buckets` on at `t`, and `D`, a multiple of `S` at most `cut - windowMs`, is at most
 * `(floor(cut / S) - buckets) x S`, so those stay at or above 0, as the shift must keep them: its
 * decide() counts no sub-window below 0 (`max(a - buckets, 0)`, `jo >= 0`: right for a state that
 * started at 0). Older sub-windows count at no such reading, shifted below 0 or not. Others: 0
 * (they read no time specially). Below the limit's rebase period, `S x (buckets + 1)`.
 */
function reachOf(lim: ResolvedLimit): number {
  return lim.algorithm === "sliding-window" && lim.buckets > 1 ? lim.windowMs : 0;
}

/** The slots of a table's entry: a SingleTable's entry is its one slot, a MultiTable's holds them in `s`. */
function slotsOf(e: { exp: number }): readonly LimitState[] {
  return (e as { s?: LimitState[] }).s ?? [e as unknown as LimitState];
}

/**
 * Shifts every entry of `gens` back by `D`, the largest multiple of the table's period at most
 * `cut` less every limit's {@link reachOf} (`cut`: ms after the old base; the caller dropped the
 * entries that expire at or before it, or gave pinned ones fresh entries, `exp` 0, passed by
 * here: so every shifted `exp` stays above 0). Returns `D`; 0: nothing moved.
 */
export function shiftEntries(limits: readonly ResolvedLimit[], gens: readonly KeyIndex<{ exp: number }>[], cut: number): number {
  const P = rebasePeriod(limits);
  if (P === 0) return 0;
  const D = Math.floor((cut - Math.max(...limits.map(reachOf))) / P) * P;
  if (D <= 0) return 0;
  for (const g of gens) {
    g.forEach((e, n) => {
      if (e.exp === 0) return; // never written: fresh (a pinned key's, memory-table.ts refreshPins)
      e.exp = relTime(e.exp, D);
      const slots = slotsOf(e);
      limits.forEach((l, i) => shiftState(l, slots[i] as LimitState, D, g.rows, n * g.width, g.width));
    });
  }
  return D;
}

/**
 * Moves the times in `lim`'s state `s` back by `D` (a multiple of the table's rebase period).
 * `rows`, `off`, `width`: the entry's row in its index (width 0 when the index keeps none); a
 * sliding log without a ring of its own keeps its ring there, the whole row (memory-kinds.ts
 * LogRowTable).
 */
function shiftState(lim: ResolvedLimit, s: LimitState, D: number, rows: Float64Array, off: number, width: number): void {
  if (lim.algorithm === "sliding-log") {
    // `a` and `b` are positions; the ring holds times (-Infinity: a unit outside for good, stays so).
    const ring = (s.ring as Float64Array | null) ?? rows.subarray(off, off + width);
    for (let i = 0; i < ring.length; i++) ring[i] = (ring[i] as number) - D;
  } else if (lim.algorithm === "sliding-window") {
    s.a = relTime(s.a, D / (lim.windowMs / lim.buckets)); // a sub-window's index; the ring and `b` stay
  } else s.a = relTime(s.a, D); // a window's start, a bucket's last update; `b` is a count or a level
}
