import type { Outcome } from "../decision.js";
import type { ResolvedLimit } from "../options.js";
import { newRing, type Ring } from "./ring.js";
import type { LimitState } from "./types.js";

/*
 * The sliding window with one sub-window (`buckets: 1`, the default: the sliding tail). Its state
 * is the newest sub-window written (`a`) and two counts, that sub-window's and the one before's,
 * in one of two layouts:
 * - the ring (sliding-window.ts): `ring[j % 2]` = the count of sub-window j, for j = a - 1 and a;
 *   the Redis store's states, and the memory store's when the limit is above PACKED_MAX_LIMIT;
 * - packed, the memory store's for limits up to PACKED_MAX_LIMIT: `ring` is null and
 *   `b = count(a) * 2^15 + count(a - 1)`. A count never exceeds the limit (an admission needs
 *   `used + cost <= limit`, and `used` includes the current count), so both fit in 15 bits and
 *   `b` stays below 2^30: a small integer, which V8 keeps inside the state object. A ring (a JS
 *   array of two slots, ring.ts) is two more objects per key (the array and its elements); over
 *   100,000 keys that is one more cache miss per decision (docs/benchmarks/memory.md).
 * Both layouts decide with the same arithmetic (sliding-tail.test.ts holds them to each other).
 */

/** The largest limit whose memory state packs its two counts into `b` (15 bits each). */
export const PACKED_MAX_LIMIT = 0x7fff;
const COUNT_BITS = 15;

/** The packed `b` of two counts, each at most PACKED_MAX_LIMIT. */
function pack(newest: number, older: number): number {
  return (newest << COUNT_BITS) | older;
}

/** A fresh state for a one-sub-window limit: packed when its counts fit (see the top of this file). */
export function initTail(lim: ResolvedLimit): LimitState {
  return { a: 0, b: 0, ring: lim.limit <= PACKED_MAX_LIMIT ? null : newRing(2) };
}

/**
 * `decide` for one sub-window, with the same results, unrolled: the two counts, the current
 * sub-window's (`cur`) and the previous one's (`prev`), are read once instead of through the
 * general loops, and a denial's walk is at most three steps written out ({@link tailDenial}, a
 * function of its own so that this one stays small enough for V8 to inline into the store's hot
 * path). This is the default algorithm of the service's rules. Its lines mirror decide()'s on
 * purpose (a duplicate finder pairs them): sharing them would bring back the loops this path
 * exists to avoid.
 */
export function decideTail(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit, out: Outcome, commit: boolean): void {
  const ring = s.ring;
  // The counts of sub-windows s.a and s.a - 1 (at s.a = 0, sub-window -1 was never written: 0).
  let newest = s.b >>> COUNT_BITS;
  let older = s.b & PACKED_MAX_LIMIT;
  if (ring !== null) {
    const k = s.a & 1; // s.a mod 2 without a division: ToInt32 keeps the low bit (2^32 is even)
    newest = ring[k] as number;
    older = ring[1 - k] as number;
  }
  decideCounts(s, ring, 0, newest, older, nowMs, cost, lim, out, commit);
}

/**
 * {@link decideTail} on counts kept in a row of a memory store's key index (`rows` from `off`, in
 * the ring's layout; the state's ring is null): stores/memory-kinds.ts TailRowTable. Both slots
 * are read before the state: their address needs nothing from it, so over many keys the row's
 * cache miss is taken beside the state's, not after it (which slot is the newest depends on
 * `s.a`). Math.ceil changes no count (whole numbers) but gives a small integer for a read from a
 * Float64Array, which would otherwise box `remaining` (memory-rows.ts). A function of its own, so
 * that decideTail stays within V8's inlining budget (with the row's reads inside, it did not:
 * --trace-turbo-inlining, and the hot key's rate fell 15%).
 */
export function decideTailRow(
  s: LimitState,
  rows: Float64Array,
  off: number,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
): void {
  const x0 = Math.ceil(rows[off] as number);
  const x1 = Math.ceil(rows[off + 1] as number);
  const odd = (s.a & 1) === 1;
  decideCounts(s, rows, off, odd ? x1 : x0, odd ? x0 : x1, nowMs, cost, lim, out, true);
}

/** The rest of {@link decideTail}, given `newest` and `older`, the counts of sub-windows s.a and s.a - 1 (kept in `ring` from `off`, or packed). */
function decideCounts(
  s: LimitState,
  ring: Ring | null,
  off: number,
  newest: number,
  older: number,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
  commit: boolean,
): void {
  const S = lim.windowMs;
  const atMs = Math.max(nowMs, s.a * S); // a clock that stepped back: as in decide()
  const behind = atMs - nowMs;
  const i = subWindowAt(s.a, atMs, S); // >= s.a; the same i and r as decide()'s
  const r = atMs - i * S;
  const ahead = i - s.a;
  const cur = ahead === 0 ? newest : 0;
  const prev = ahead === 0 ? older : ahead === 1 ? newest : 0;
  const used = lim.weighted && prev > 0 ? cur + Math.floor((prev * (S - r)) / S) : cur;
  out.delayMs = 0;
  if (used + cost <= lim.limit) {
    out.allowed = true;
    out.remaining = lim.limit - used - cost;
    out.retryAfterMs = 0;
    // As in decide(): the key is back to its full allowance once sub-window i has left the window.
    const p = cur + cost;
    out.resetAfterMs = S - r + (lim.weighted ? S - Math.floor((S - 1) / p) : 0) + behind;
    // commit(): advance to i, then add the cost: i holds cur + cost, i - 1 its count, prev.
    if (commit) writeTail(s, ring, off, i, p, prev);
  } else tailDenial(cur, prev, used, lim, r, cost, behind, out);
}

/**
 * floor(atMs / S) for `atMs >= a * S` and a whole number `S`: nearly every decision falls in
 * sub-window `a` (the newest written) or the next, found by comparing instead of dividing (a
 * division of doubles is a long step; this is the hot path). Integers below 2^53, so the
 * products are exact.
 */
export function subWindowAt(a: number, atMs: number, S: number): number {
  const since = atMs - a * S;
  if (since < S) return a;
  return since < 2 * S ? a + 1 : Math.floor(atMs / S);
}

/** Makes `i` the newest sub-window written, with `newest` units, and `older` in sub-window i - 1 (in `ring` from `off`, or packed). */
function writeTail(s: LimitState, ring: Ring | null, off: number, i: number, newest: number, older: number): void {
  if (ring === null) s.b = pack(newest, older);
  else {
    const slot = i & 1; // as in decideTail
    ring[off + slot] = newest;
    ring[off + 1 - slot] = older;
  }
  s.a = i;
}

/** `commit` of a packed state: adds `cost` to sub-window `i` (>= s.a, the sub-window decide() found). */
export function commitPacked(s: LimitState, i: number, cost: number): void {
  const newest = s.b >>> COUNT_BITS;
  const ahead = i - s.a;
  s.b = pack((ahead === 0 ? newest : 0) + cost, ahead === 0 ? s.b & PACKED_MAX_LIMIT : ahead === 1 ? newest : 0);
  s.a = i;
}

/**
 * `refund` of a packed state (`i`, >= s.a, as refund() finds it): takes the units back from the
 * newest sub-windows still counted at i, as the ring's refund does: s.a when it is i or i - 1,
 * then s.a - 1 when s.a is i (i - 1 is still partly counted).
 */
export function refundPacked(s: LimitState, i: number, cost: number): void {
  if (s.a < i - 1) return;
  const newest = s.b >>> COUNT_BITS;
  const older = s.b & PACKED_MAX_LIMIT;
  const fromNewest = Math.min(cost, newest);
  const fromOlder = s.a === i ? Math.min(cost - fromNewest, older) : 0;
  s.b = pack(newest - fromNewest, older - fromOlder);
}

/**
 * A denial for one sub-window: the remaining count, then the walk of denialWaits()
 * (sliding-window.ts) over sub-windows i, i + 1 and i + 2 written out. At i (from offset r) `cur` is counted in full and
 * `prev` partly (weighted); at i + 1 (from its start) only `cur` is, partly; at i + 2 nothing
 * is. A step that does not fit is skipped before any arithmetic, as fitsAt() returns -1 for it.
 */
function tailDenial(
  cur: number,
  prev: number,
  used: number,
  lim: ResolvedLimit,
  r: number,
  cost: number,
  behind: number,
  out: Outcome,
): void {
  out.allowed = false;
  out.remaining = Math.max(0, lim.limit - used);
  const S = lim.windowMs;
  const free = lim.limit - cost; // the count that may remain for `cost` to fit
  const p0 = lim.weighted ? prev : 0;
  const p1 = lim.weighted ? cur : 0;
  let x = free >= cur ? offsetIn(free - cur, p0, S, r) : S;
  let retry = x < S ? x - r : -1;
  x = cur === 0 ? offsetIn(0, p0, S, r) : S;
  let reset = x < S ? x - r : -1;
  if (reset < 0) {
    x = offsetIn(0, p1, S, 0);
    reset = x < S ? S + x - r : 2 * S - r;
    // When `cost` is the whole limit, it fits exactly when the whole limit is free: at the reset.
    if (retry < 0 && free >= 0) {
      if (free === 0) retry = reset;
      else {
        x = offsetIn(free, p1, S, 0);
        retry = x < S ? S + x - r : 2 * S - r;
      }
    }
  }
  out.retryAfterMs = retry + behind;
  out.resetAfterMs = reset + behind;
}

/**
 * fitsAt() within one sub-window of `S` ms, for `need >= 0`: the earliest offset from `from` on
 * at which `partial` partly counted units leave `need` free, or S if none does before its end.
 */
function offsetIn(need: number, partial: number, S: number, from: number): number {
  if (partial === 0) return from;
  return Math.min(S, Math.max(from, S - Math.floor(((need + 1) * S - 1) / partial)));
}
