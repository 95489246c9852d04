/**
 * The time a memory table hands its algorithms: milliseconds after the table's `base`, not since
 * the epoch, so that the times the algorithms keep in a key's state (`a`: a fixed window's start,
 * a bucket's last update, a sliding window's sub-window index; the sliding log's ring) and the
 * slot's `exp` are small integers. V8 stores a small integer (a Smi: 32 bits signed in node 20 on
 * x64, which has no pointer compression) inside the object; an epoch time in ms is not one, so a
 * field that held one got a heap-number box of its own, and once one object of a hidden class
 * has a non-Smi in a field, every object of that class keeps the field as a box (the field's
 * representation only ever widens). Over many keys visited in no order each box is one more cache
 * miss per decision (docs/benchmarks/memory.md, "small integers in the slot").
 *
 * Why decisions do not change: the pure algorithms (core/algorithms) decide the same after
 * every time is moved by the same amount, as long as the clock-aligned ones are moved by a whole
 * number of their periods, and fresh states read the same. Checked per algorithm:
 * - buckets (token, leaky, GCRA): only differences of times (`nowMs - s.a`) and `Math.max(nowMs,
 *   s.a)`: any shift. The sliding log: times in its ring are compared with each other and with
 *   `t - windowMs`: any shift. A first-request fixed window: `nowMs - s.a`: any shift.
 * - a clock-aligned fixed window floors by `windowMs` (`nowMs - mod(nowMs, windowMs)`), a sliding
 *   window by its sub-window `windowMs / buckets` (`floor(t / S)`; its ring's slot `mod(i, M)`
 *   only rotates, and the ring is this table's own): the base is a multiple of that period, of
 *   every limit's in a table of several (their least common multiple).
 * - fresh states (`a = 0, b = 0`, also after expiry) are special: `Math.max(nowMs - mod, s.a)`,
 *   `Math.max(nowMs, s.a)`, a sliding window's "sub-window -1 was never written". With `a = 0`
 *   they decide the same at relative time `r >= 0` as the absolute algorithm at `base + r`
 *   (`>= 0`): a fresh state never constrains a time at or after its `a`. So the base lies
 *   {@link BEFORE_FIRST} (2^30 ms, 12.4 days) before the table's first reading (rounded down to
 *   the period), and a clock that steps back up to that far still reads a positive time.
 *
 * Limits of this: a clock read more than 12.4 days before the table's first reading (a relative
 * time below 0) decides a key without state as if its fresh state had been written at the base
 * (waits counted from there) instead of as the absolute reference does; no real clock steps back
 * that far between two readings of one process. Values stay small integers while the process's
 * clock is within about 2^30 ms (12.4 days, less the period) after the table's first reading
 * (`exp` a window less; a period near 2^30 leaves little of that); past that they are boxes again,
 * as they were before, with the same decisions. Periods above {@link MAX_PERIOD} (a window of
 * over 12 days, or several limits whose periods share few factors) and clocks near the epoch
 * (below BEFORE_FIRST: tests, a monotonic clock) keep base 0: the absolute times of before. The
 * base is set once; no rebase. One table whose values leave the Smi range widens the field for
 * every slot of the process (the hidden class is shared), as any epoch time did before.
 */
import { gcd } from "../core/arith.js";
import type { ResolvedLimit } from "../core/options.js";

/** How far before its first reading a table's base lies, at least (ms): 2^30, 12.4 days. */
export const BEFORE_FIRST = 2 ** 30;

/** The longest period (ms) a base is aligned to; a longer one keeps base 0: 2^30, 12.4 days. */
export const MAX_PERIOD = 2 ** 30;

/** The period a limit's decisions are aligned on: the base must be a multiple of it (see above). */
export function periodOf(lim: ResolvedLimit): number {
  if (lim.algorithm === "fixed-window") return lim.alignFirst ? 1 : lim.windowMs;
  if (lim.algorithm === "sliding-window") return lim.windowMs / lim.buckets;
  return 1;
}

/** The base of a table of `limits` whose first reading is `firstMs` (see the top of this file). */
export function baseFor(limits: readonly ResolvedLimit[], firstMs: number): number {
  let p = 1;
  for (const l of limits) {
    const q = periodOf(l);
    p = (p / gcd(p, q)) * q;
    if (p > MAX_PERIOD) return 0;
  }
  const base = Math.floor((firstMs - BEFORE_FIRST) / p) * p;
  return base > 0 ? base : 0;
}

/**
 * `now - base` as a small integer when it is one: the difference of two doubles is a heap number
 * in V8's interpreter even when whole, and written into a state it would widen the field for every
 * state (see the top of this file). `| 0` changes no value here: it is taken only when exact.
 */
export function relTime(now: number, base: number): number {
  const r = now - base;
  return (r | 0) === r ? r | 0 : r;
}
