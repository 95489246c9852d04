/**
 * A sliding window of several sub-windows in the memory store, its ring counts kept in rows: each
 * key's `buckets + 2` counts (the ring and its total, core/algorithms/sliding-window.ts) are
 * numbers in one Float64Array of the key's index (key-index.ts `rows`), at the key's entry number
 * times their count, and its state object (`Slot`) has no ring (`ring` null).
 *
 * Why: over many keys in no order, a decision is bound by cache misses, each on an address the
 * one before gave. With a ring object the chain was slot table -> entry's state -> ring array ->
 * its elements, two misses more than the fixed window's (perf annotate: nearly all of
 * decideRing's samples on those two loads, docs/benchmarks/memory.md). A row's address comes from
 * the slot table alone (the entry number), so its miss is taken beside the state's, not after it.
 *
 * Exactness: the fast decision below is decideRing()'s arithmetic on the row's numbers; every
 * other case (a fresh key, a later sub-window, a clock that stepped back, a denial's walk, peek,
 * refund) copies the row into a ring array, runs the algorithm's own code on the state with that
 * ring, and copies it back. Rows are Float64: every count a ring array holds, exactly. The table
 * moves a key's row with its entry between generations and pins (memory-table.ts, `carry`).
 *
 * Small integers: before V8 optimizes this code, a number read from a Float64Array, and any sum
 * of such, is a heap number. Stored once into the decision's `remaining`, it made V8 keep that
 * field of every decision of the process as a box: 16 bytes more allocated per decision (bench
 * --only-alloc, 113 -> 129 bytes) and a slower hot key (`%DebugPrint`: remaining a HeapNumber).
 * Every count is a whole number (costs and limits are safe integers), so `Math.ceil` changes no
 * value, and returns a small integer when it fits one, as `exp` does (memory-table.ts); the same
 * for the counts copied into the lent ring, which stays an array of small integers.
 */
import { decide } from "../core/algorithms/sliding-window.js";
import type { Ring } from "../core/algorithms/ring.js";
import type { LimitState } from "../core/algorithms/types.js";
import type { Outcome } from "../core/decision.js";
import type { ResolvedLimit } from "../core/options.js";

/** decideRing() (sliding-window.ts) with commit, the ring being the `buckets + 2` numbers of `rows` from `off`. */
export function decideRow(
  s: LimitState,
  rows: Float64Array,
  off: number,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
  tmp: number[],
): void {
  const S = lim.windowMs / lim.buckets;
  const r = nowMs - s.a * S;
  const kept = s.b; // the slot of sub-window s.a, plus 1 (0: not kept)
  const B = lim.buckets;
  const M = B + 1;
  const total = rows[off + M] as number; // read first: its address needs nothing from the state
  if (kept === 0 || r < 0 || r >= S) return onRing(s, rows, off, nowMs, cost, lim, out, tmp);
  const slot = kept === M ? 0 : kept; // sub-window s.a - B's, after s.a's
  const full = total - (rows[off + slot] as number);
  const oldest = s.a >= B ? (rows[off + slot] as number) : 0;
  const used = lim.weighted && oldest > 0 ? full + Math.floor((oldest * (S - r)) / S) : full;
  if (used + cost > lim.limit) return onRing(s, rows, off, nowMs, cost, lim, out, tmp); // the denial's walk
  out.delayMs = 0;
  out.allowed = true;
  out.remaining = Math.ceil(lim.limit - used - cost); // a whole number: see above
  out.retryAfterMs = 0;
  const p = (rows[off + kept - 1] as number) + cost;
  out.resetAfterMs = lim.windowMs - r + (lim.weighted ? S - Math.floor((S - 1) / p) : 0);
  rows[off + kept - 1] = p; // addUnits() with nothing to advance: s.a and b stay
  rows[off + M] = total + cost;
}

/**
 * decide() with commit on the state with its row as a ring (`tmp`, a ring array of `buckets + 2`),
 * written back after: withRing() without its closure and `try`, so that decideRow, which inlines
 * into the store's consume, stays small (decide() throws nothing).
 */
function onRing(
  s: LimitState,
  rows: Float64Array,
  off: number,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
  tmp: number[],
): void {
  const w = tmp.length;
  for (let i = 0; i < w; i++) tmp[i] = Math.ceil(rows[off + i] as number); // see above
  s.ring = tmp;
  decide(s, nowMs, cost, lim, out, true);
  s.ring = null;
  for (let i = 0; i < w; i++) rows[off + i] = tmp[i] as number;
}

/**
 * Runs `f` with `s.ring` the row at `off` (copied into `tmp`), then writes the ring back to the row;
 * `s.ring` is null again after. A ring array gets whole counts through Math.ceil (see above); a
 * Float64Array (the sliding log's times, which may be fractional on an injected clock) as they are.
 */
export function withRing<T>(s: LimitState, rows: Float64Array, off: number, tmp: Ring, f: () => T): T {
  const w = tmp.length;
  if (Array.isArray(tmp)) for (let i = 0; i < w; i++) tmp[i] = Math.ceil(rows[off + i] as number);
  else for (let i = 0; i < w; i++) tmp[i] = rows[off + i] as number;
  s.ring = tmp;
  try {
    return f();
  } finally {
    s.ring = null;
    for (let i = 0; i < w; i++) rows[off + i] = tmp[i] as number;
  }
}
