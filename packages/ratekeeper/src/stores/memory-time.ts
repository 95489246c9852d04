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
 * The rebase (memory-rebase.ts). A reading more than REBASE_AT (1.5 x 2^30 ms, 18.6 days) after
 * the base first moves the base forward by `D` and every kept time back by `D`: each key's `exp`,
 * its `a` (for a sliding window, a sub-window index: back by `D / S`), the sliding log's ring of
 * times (its `a` and `b` are positions); not `b` (a count, a level, a ring slot) nor a
 * DenialSlot's distances before `exp`. `D` is a multiple of every limit's rebase period: the
 * period above, but for a sliding window whose counts sit in a ring (sub-window `i` in slot
 * `mod(i, buckets + 1)`, and `b` names a slot) `S x (buckets + 1)`, so that no slot moves (`S`
 * when a one-sub-window limit packs its two counts into `b`, sliding-tail.ts). Each
 * shifted state is then the same state on the new clock, as the list above shows. `D` is the
 * largest such multiple at most `cut`, the newest reading less 2^30 ms (so the new base again lies
 * 2^30 ms before a reading, as the first one did), after the keys that expired by `cut` are
 * dropped (only a reading before `cut` could still find them live). A kept key's `exp` is after
 * `cut`, so it stays above 0 (0: never written). One more bound: a sliding window of several
 * sub-windows counts no sub-window below 0 (decide()'s `max(a - buckets, 0)`, right for a state
 * that started at 0), so with such a limit `D` stays `windowMs` (less than its period) below
 * `cut`: at a reading at or after `cut` it counts sub-windows from `floor(t / S) - buckets` on,
 * which then stay at or above 0, and older ones count at no such reading, shifted below 0 or not
 * (nor does the ring's total, read only at the newest sub-window written, include them). Nothing
 * else reads `a = 0` specially (a one-sub-window limit reads its older count from `b` or its
 * ring, not from `a`), so a state shifted to `a = 0` is not taken for a fresh one.
 *
 * Where it runs: in the decision path (Table.relOf), one compare of the relative reading with the
 * table's `rebaseAt` per consume, peek or refund, and the pass over the keys once every 2^29 ms
 * (6.2 days): 25-35 ms for a million keys of a fixed window, a bucket or the default sliding
 * window, 50-60 ms of sliding windows of 6 sub-windows, 70-120 ms of sliding logs (node 20,
 * bench/rebase-pass.js). Not in MemoryStore.sweep: its timer reads
 * `Date.now()`, which is not the table's clock when the limiter injects one (tests, simulations,
 * a monotonic clock), and it is off with `sweepIntervalMs: 0` and may never run on a runtime that
 * holds no timer between requests. The decision path sees exactly the readings the table decides
 * on, and the one that crosses `rebaseAt` is the newest it has seen (every earlier one was at most
 * the threshold of its time, and thresholds only move forward).
 *
 * Limits of this: every reading no more than 2^30 ms (12.4 days) before the newest the table has
 * seen decides as the absolute algorithm (the base and the last rebase's `cut` both lie at least
 * that far back). An earlier reading decides a key without state as if its fresh state had been
 * written at the base (waits counted from there), and finds fresh a key that had expired before
 * the last rebase's `cut`; no real clock steps back that far between two readings of one process.
 * Values stay small integers while a key's state matters for less than the 2^29 ms (6.2 days)
 * between REBASE_AT and 2^31 (`exp` is a box beyond). A table whose rebase period is above
 * MAX_REBASE_PERIOD (2^28 ms, 3.1 days: a clock-aligned window longer than that, a sliding window
 * whose `S x (buckets + 1)` is, several limits whose periods share few factors) never rebases and
 * keeps values small integers for about 12 days after its first reading, as before the rebase;
 * periods above {@link MAX_PERIOD} (a window of over 12 days) and clocks near the epoch (below
 * BEFORE_FIRST: tests, a monotonic clock) keep base 0 (a clock near the epoch rebases once it is
 * 18.6 days on). One table whose values leave the Smi range widens the field for every slot of
 * the process (the hidden class is shared), as any epoch time did before.
 */
import { gcd } from "../core/arith.js";
import type { ResolvedLimit } from "../core/options.js";

/** How far before its first reading (and before the reading of each rebase) a table's base lies, at least (ms): 2^30, 12.4 days. */
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
