import type { LimitState } from "../../core/algorithms/index.js";
import type { ResolvedLimit } from "../../core/options.js";

/**
 * The counter layout of a clock-aligned fixed window in Redis: the key's value is one integer,
 * `tag * SPAN + count`, so that a decision in the window the key already counts is a single
 * `INCRBY` (Redis stores a small integer inside the key's object: no second allocation, and the
 * key costs fewer bytes than the two packed numbers of the other layouts).
 *
 * - `tag` (1..TAGS) names the window the count belongs to: `(windowStart / windowMs) mod TAGS + 1`
 *   (0 never occurs, so a key `INCRBY` just created, whose tag is 0, reads as fresh);
 * - `count` (0 <= count < SPAN) is the units counted in that window. Denied consumes also add to
 *   it (the script takes back only a denial that could have left room for a smaller request), so
 *   a stored count above the limit means "the limit, all spent": min(count, limit) is always
 *   exactly what the window admitted, the number the memory store keeps.
 *
 * A tag tells the key's window apart from the decision's by the difference mod TAGS: 0 the same
 * window, 1..HALF a later one (a decision whose clock lags counts in the newest window seen, as
 * fixed-window.ts does), anything else an earlier one (the key is stale: the window restarts).
 * That is unambiguous while a key never outlives TAGS - HALF windows and no decision lags more
 * than HALF windows, which {@link counterFits} checks against the store's minTtlMs (a key lives
 * minTtlMs past its window's end; a decision lagging more than that is not protected anyway).
 * All values stay below 2^53, so Lua's doubles and JS numbers hold them exactly.
 * ratekeeper.lua and lease.lua implement the same layout; the differential tests hold them together.
 */
export const COUNTER_TAGS = 16_383;
/** Tag differences 1..HALF are later windows. */
export const COUNTER_HALF = 8_191;
/** 2^39: counts stay far below it (the script folds a count past SPAN / 2 back to the limit). */
export const COUNTER_SPAN = 549_755_813_888;

/**
 * Whether a limit is stored in the counter layout: a clock-aligned fixed window whose limit is
 * well below SPAN and whose keys (alive windowMs + minTtlMs) span few enough windows for the tags.
 */
export function counterFits(lim: ResolvedLimit, minTtlMs: number): boolean {
  if (lim.algorithm !== "fixed-window" || lim.alignFirst) return false;
  if (lim.limit * 4 >= COUNTER_SPAN) return false;
  const lifetimeWindows = 2 + Math.ceil(minTtlMs / lim.windowMs);
  return lifetimeWindows < COUNTER_TAGS - COUNTER_HALF && lifetimeWindows <= COUNTER_HALF;
}

/**
 * The fixed-window state ({ a: window start, b: count }) a counter value stands for at `nowMs`:
 * 0 (no key) is the fresh state; -1 (the fast path's reply when it replaced a key of a window that
 * was over) and a tag of an earlier window count nothing, in the clock's window.
 */
export function counterState(value: number, nowMs: number, lim: ResolvedLimit, s: LimitState): void {
  s.a = 0;
  s.b = 0;
  if (value === 0) return;
  // -1 (the script opened a new window over one that was over) or a tag of an earlier window:
  // a state that counts nothing now, whose window is the clock's (a = -inf, not the fresh a = 0).
  s.a = Number.NEGATIVE_INFINITY;
  const tag = Math.floor(value / COUNTER_SPAN);
  if (tag < 1) return;
  const W = lim.windowMs;
  const w = Math.floor(nowMs / W); // the clock's window index (exact: integers below 2^53)
  const here = w - Math.floor(w / COUNTER_TAGS) * COUNTER_TAGS + 1;
  let d = (tag - here) % COUNTER_TAGS;
  if (d < 0) d += COUNTER_TAGS;
  if (d > COUNTER_HALF) return;
  s.a = (w + d) * W;
  s.b = Math.min(value - tag * COUNTER_SPAN, lim.limit);
}
