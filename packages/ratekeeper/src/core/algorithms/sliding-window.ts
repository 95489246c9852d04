import type { Outcome } from "../decision.js";
import type { ResolvedLimit } from "../options.js";
import { mod } from "../arith.js";
import { newRing, type Ring } from "./ring.js";
import { commitPacked, decideTail, initTail, refundPacked, subWindowAt } from "./sliding-tail.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * Sliding window counters (the sub-window buckets of Figma's "An alternative approach to rate
 * limiting") and, with `buckets: 1`, the weighted sliding tail (ClassDojo's sliding window
 * counter, Cloudflare's rate limiting).
 *
 * The window is cut into `buckets` sub-windows of `S = windowMs / buckets`, aligned to the clock.
 * At `now` in sub-window `i` (at offset `r`), the count is the sum of sub-windows `i-buckets+1 .. i`
 * plus, when `weighted`, the part of sub-window `i-buckets` still inside the window:
 * `floor(count[i-buckets] * (S - r) / S)`: rounded down, so the estimate never exceeds the count.
 *
 * State: `a` = index of the newest sub-window written; `ring[j % (buckets+1)]` = cost admitted in
 * sub-window `j`, valid for `max(a - buckets, 0) <= j <= a` (any other sub-window counts 0). With
 * several sub-windows a memory state's ring has one slot more, `ring[buckets + 1]`, the sum of
 * the others (see addUnits), and `b` holds the slot of sub-window `a` plus 1 (0: not kept); a
 * state the Redis store builds from its reply has neither. With one sub-window (sliding-tail.ts,
 * which decides that case), the memory store's state keeps its two counts packed into `b`, with
 * no ring, when the limit is at most 32,767. The walks below step through the ring's slots one by
 * one instead of taking a modulo per sub-window: the modulo of these doubles is a division, and
 * divisions were most of the cost.
 */
export const slidingWindow: Algorithm = {
  // With several sub-windows, one more slot at the end keeps the ring's total (see addUnits); one
  // sub-window's state packs its counts into `b` when they fit (sliding-tail.ts).
  init: (lim) => (lim.buckets === 1 ? initTail(lim) : { a: 0, b: 0, ring: newRing(lim.buckets + 2) }),

  check(s, nowMs, cost, lim, out) {
    if (lim.buckets === 1) decideTail(s, nowMs, cost, lim, out, false);
    else decide(s, nowMs, cost, lim, out, false);
  },

  consume(s, nowMs, cost, lim, out) {
    if (lim.buckets === 1) decideTail(s, nowMs, cost, lim, out, true);
    else decide(s, nowMs, cost, lim, out, true);
  },

  commit(s, nowMs, cost, lim) {
    const i = Math.max(Math.floor(nowMs / (lim.windowMs / lim.buckets)), s.a);
    if (s.ring === null) commitPacked(s, i, cost);
    else addUnits(s, lim, i, mod(i, lim.buckets + 1), cost);
  },

  refund(s, nowMs, cost, lim) {
    const i = Math.max(Math.floor(nowMs / (lim.windowMs / lim.buckets)), s.a);
    const ring = s.ring;
    if (ring === null) return refundPacked(s, i, cost);
    const M = lim.buckets + 1;
    // Take the units back from the newest sub-windows still counted, the partly counted oldest one
    // (i - buckets) included: the refunded units are the newest ones, so this is exactly the state
    // the key would have without them. Sub-windows older than that never count again.
    let left = cost;
    let slot = mod(s.a, M);
    for (let j = s.a; left > 0 && j > s.a - M && j >= i - lim.buckets; j--) {
      const take = Math.min(left, ring[slot] as number);
      ring[slot] = (ring[slot] as number) - take;
      left -= take;
      slot = slot === 0 ? M - 1 : slot - 1;
    }
    if (ring.length > M) ring[M] = (ring[M] as number) - (cost - left); // the total (see addUnits)
  },
};

/**
 * `check`, and when `commit` and allowed, `commit` too, for any number of sub-windows.
 * @internal exported for the test that holds {@link decideTail} to it.
 */
export function decide(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit, out: Outcome, commit: boolean): void {
  const S = lim.windowMs / lim.buckets;
  // A clock that stepped back before the newest sub-window written: decide as at that
  // sub-window's start (else its units would not be counted at all), and count the waits from
  // this earlier reading, so that they stay truthful on this clock.
  const atMs = Math.max(nowMs, s.a * S);
  const behind = atMs - nowMs;
  const i = subWindowAt(s.a, atMs, S); // floor(atMs / S); S is a whole number of ms (options.ts)
  const r = atMs - i * S;
  const jo = i - lim.buckets; // the sub-window partly counted at i (weighted)
  const M = lim.buckets + 1;
  // jo's slot: in the newest sub-window written (i = s.a), the one after s.a's (jo = i + 1 modulo
  // M), which a memory state keeps in b, plus 1 (addUnits); else (or b = 0) by a modulo.
  const kept = s.b;
  const slot = i === s.a && kept > 0 ? (kept === M ? 0 : kept) : mod(jo, M);
  const ring = s.ring as Ring;
  // In the newest sub-window written, with the ring's total at hand (addUnits), the full count is
  // the total less the oldest slot's (which holds 0 when jo < 0); otherwise the slots are summed.
  const full = i === s.a && ring.length > M ? (ring[M] as number) - (ring[slot] as number) : fullCount(s, lim, i, slot);
  const oldest = jo <= s.a && jo >= s.a - lim.buckets && jo >= 0 ? (ring[slot] as number) : 0;
  const used = lim.weighted && oldest > 0 ? full + Math.floor((oldest * (S - r)) / S) : full;
  out.delayMs = 0;
  if (used + cost <= lim.limit) {
    out.allowed = true;
    out.remaining = lim.limit - used - cost;
    out.retryAfterMs = 0;
    // After the admission sub-window i is the newest with units (p of them), so the key is back to
    // its full allowance once i leaves: at (i + buckets) * S unweighted; weighted, once
    // floor(p * (S - x) / S) is 0 in the sub-window after, i.e. x = S - floor((S - 1) / p)
    // (x = S: at its end). The same answer as walking the sub-windows for the whole limit with
    // `cost` added to sub-window i (as denialWaits walks them), without the walk.
    // Sub-window i's slot is the one before jo's (i = jo + buckets), and i >= s.a, so i holds
    // units only when it is s.a.
    const own = slot === 0 ? lim.buckets : slot - 1;
    const p = (i === s.a ? (ring[own] as number) : 0) + cost;
    out.resetAfterMs = lim.windowMs - r + (lim.weighted ? S - Math.floor((S - 1) / p) : 0) + behind;
    // commit(): the sub-window of nowMs, or the newest one written when the clock stepped back: i.
    if (commit) addUnits(s, lim, i, own, cost);
  } else {
    out.allowed = false;
    out.remaining = Math.max(0, lim.limit - used);
    denialWaits(s, lim, S, i, r, slot, cost, behind, full, out);
  }
}

/**
 * decide() with commit, for a memory state of several sub-windows (its ring has the total slot),
 * as the memory store calls it (stores/memory-kinds.ts). The common decision, at a time in the
 * newest sub-window written with its slot kept in `b` (a flood on a key; a denied key knocking
 * again), is decide()'s own arithmetic with i = s.a and nothing behind, written out: decide() is
 * 579 bytes of bytecode, more than the 460 V8 inlines at all, so it was a real call on every
 * decision; this is small enough to inline into the store's hot path. Any other case (a fresh
 * key, a later sub-window, a clock that stepped back) goes to decide(). sliding-ring.test.ts
 * holds the two to the same outcomes and states.
 */
export function decideRing(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit, out: Outcome): void {
  const S = lim.windowMs / lim.buckets;
  const r = nowMs - s.a * S;
  const kept = s.b; // the slot of sub-window s.a, plus 1 (0: not kept)
  if (kept === 0 || r < 0 || r >= S) return decide(s, nowMs, cost, lim, out, true);
  const B = lim.buckets;
  const M = B + 1;
  const ring = s.ring as Ring;
  const slot = kept === M ? 0 : kept; // sub-window s.a - B's, after s.a's
  const full = (ring[M] as number) - (ring[slot] as number);
  const oldest = s.a >= B ? (ring[slot] as number) : 0;
  const used = lim.weighted && oldest > 0 ? full + Math.floor((oldest * (S - r)) / S) : full;
  out.delayMs = 0;
  if (used + cost <= lim.limit) {
    out.allowed = true;
    out.remaining = lim.limit - used - cost;
    out.retryAfterMs = 0;
    const p = (ring[kept - 1] as number) + cost;
    out.resetAfterMs = lim.windowMs - r + (lim.weighted ? S - Math.floor((S - 1) / p) : 0);
    ring[kept - 1] = p; // addUnits() with nothing to advance: s.a and b stay
    ring[M] = (ring[M] as number) + cost;
  } else {
    out.allowed = false;
    out.remaining = Math.max(0, lim.limit - used);
    denialWaits(s, lim, S, s.a, r, slot, cost, 0, full, out);
  }
}

/**
 * A denial's retryAfterMs (the earliest wait after which `cost` fits) and resetAfterMs (after
 * which the whole limit fits), with no other requests. The count never grows with time, so both
 * are exact: retrying after them succeeds (sliding-denial.test.ts checks them against a search
 * millisecond by millisecond). `counted` is the full count at sub-window i (fullCount()); `S`,
 * the sub-window's length, and `slotJo`, the slot of sub-window i - B, are decide()'s.
 *
 * The whole limit is back once n, the newest sub-window still counted that holds units, has left
 * the window: from step k = n - i + B of the walk below on (step k: the sub-window leaving is
 * i - B + k), nothing else is counted, so the reset is found there, without walking to it. The
 * retry never comes after the reset; and when n alone holds more than `limit - cost`, no step
 * before n's can fit `cost`, so the retry is found at n's step too. Only otherwise (the units
 * spread over several sub-windows) does the walk run, and it stops at the first step that fits.
 * Under a flood on one key, that is nearly always the first one or two. ratekeeper.lua's waitMs
 * walks every step, once for each wait, with the same results.
 */
function denialWaits(
  s: LimitState,
  lim: ResolvedLimit,
  S: number,
  i: number,
  r: number,
  slotJo: number,
  cost: number,
  behind: number,
  counted: number,
  out: Outcome,
): void {
  const B = lim.buckets;
  const M = B + 1;
  const ring = s.ring as Ring;
  const lo = Math.max(s.a - B, 0); // the ring holds sub-windows lo .. s.a
  // n: the newest counted sub-window with units, in slot ns (sub-window i - B is partly counted).
  // When the newest sub-window written is i (under a flood it is), its slot is the one before
  // i - B's (i = jo + B), so no division is needed to find it.
  let n = s.a;
  let ns = n === i ? (slotJo === 0 ? B : slotJo - 1) : mod(n, M);
  const oldestCounted = Math.max(lo, i - B);
  while (n >= oldestCounted && (ring[ns] as number) === 0) {
    n--;
    ns = ns === 0 ? B : ns - 1;
  }
  const free = lim.limit - cost; // the count that may remain for `cost` to fit
  if (n < oldestCounted) {
    // Nothing is counted (a cost above the limit is the only way to be refused).
    out.retryAfterMs = (free >= 0 ? 0 : -1) + behind;
    out.resetAfterMs = behind;
    return;
  }
  const kn = n - i + B;
  const from = kn === 0 ? r : 0;
  const units = ring[ns] as number;
  const partial = lim.weighted ? units : 0;
  // At step kn nothing but n is counted, partly; if n is still counted at the end of that
  // sub-window, at step kn + 1 nothing is.
  let reset = fitsAt(0, partial, S, kn, from, r);
  if (reset < 0) reset = (kn + 1) * S - r;
  let retry: number;
  // When `cost` is the whole limit, it fits exactly when the whole limit is free: at the reset.
  if (free === 0) retry = reset;
  else if (free < units) {
    retry = fitsAt(free, partial, S, kn, from, r);
    if (retry < 0 && free >= 0) retry = (kn + 1) * S - r; // found with the reset, a step later
  } else retry = firstFit(s, lim, S, i, r, free, counted);
  out.retryAfterMs = retry + behind;
  out.resetAfterMs = reset + behind;
}

/**
 * The walk for the retry: steps k = 0, 1, ... (sub-window i - B + k leaving the window), until
 * `free` units are free at one of them. Only called when one is, at the latest when the newest
 * sub-window with units leaves (see denialWaits). The slot of the sub-window leaving moves on
 * by one per step, so the walk reads the ring without a modulo per step.
 */
function firstFit(s: LimitState, lim: ResolvedLimit, S: number, i: number, r: number, free: number, counted: number): number {
  const B = lim.buckets;
  const M = B + 1;
  const ring = s.ring as Ring;
  const lo = Math.max(s.a - B, 0);
  let full = counted;
  for (let k = 0, slot = mod(i - B, M); k <= B + 1; k++, slot = slot === B ? 0 : slot + 1) {
    const j = i + k - B;
    const oldest = j >= lo && j <= s.a ? (ring[slot] as number) : 0;
    if (k > 0) full -= oldest;
    const retry = fitsAt(free - full, lim.weighted ? oldest : 0, S, k, k === 0 ? r : 0, r);
    if (retry >= 0) return retry;
  }
  return (B + 1) * S - r; // unreachable: after B + 1 sub-windows nothing is counted
}

/**
 * One step of the walk: the wait until sub-window `i + k` (from offset `from`) when `need` units
 * are free there, counting `partial` units of the sub-window leaving (weighted), else -1. Waits
 * are counted from offset `r` of sub-window `i`.
 * floor(partial * (S - x) / S) <= need  <=>  x >= S - floor(((need + 1) * S - 1) / partial)
 */
function fitsAt(need: number, partial: number, S: number, k: number, from: number, r: number): number {
  if (need < 0) return -1;
  if (partial === 0) return k * S + from - r;
  const x = Math.max(from, S - Math.floor(((need + 1) * S - 1) / partial));
  return x < S ? k * S + x - r : -1;
}

/**
 * The units of sub-windows `i - buckets + 1 .. i`, the ones counted in full at sub-window `i`;
 * `before` is the slot of sub-window `i - buckets`. The slots are stepped through rather than
 * each found by a modulo.
 */
function fullCount(s: LimitState, lim: ResolvedLimit, i: number, before: number): number {
  const B = lim.buckets;
  const ring = s.ring as Ring;
  const lo = Math.max(s.a - B, 0); // the ring holds sub-windows lo .. s.a
  let full = 0;
  for (let j = i - B + 1, slot = before === B ? 0 : before + 1; j <= i; j++, slot = slot === B ? 0 : slot + 1) {
    if (j >= lo && j <= s.a) full += ring[slot] as number;
  }
  return full;
}

/**
 * Adds `cost` units to sub-window `i` (slot `own`), moving the ring forward to it first. A memory
 * state with several sub-windows has one slot more than the `buckets + 1` of the layout, and keeps
 * the sum of the others there, so that decide() finds the full count without summing the slots
 * (a state the Redis store builds from its script's reply has no such slot, and sums them).
 */
function addUnits(s: LimitState, lim: ResolvedLimit, i: number, own: number, cost: number): void {
  advance(s, lim, i);
  s.b = (own + 1) | 0; // s.a's slot, plus 1, for decide(); `| 0` keeps b a small integer (types.ts)
  const ring = s.ring as Ring;
  ring[own] = (ring[own] as number) + cost;
  const M = lim.buckets + 1;
  if (ring.length > M) ring[M] = (ring[M] as number) + cost;
}

/** Moves the ring forward to sub-window `i`, clearing the sub-windows skipped (and taking them off the total). */
function advance(s: LimitState, lim: ResolvedLimit, i: number): void {
  if (i <= s.a) return;
  const ring = s.ring as Ring;
  const M = lim.buckets + 1;
  if (i - s.a >= M) ring.fill(0);
  else {
    let cleared = 0;
    for (let j = s.a + 1, slot = mod(j, M); j <= i; j++, slot = slot === M - 1 ? 0 : slot + 1) {
      cleared += ring[slot] as number;
      ring[slot] = 0;
    }
    if (ring.length > M) ring[M] = (ring[M] as number) - cleared;
  }
  s.a = i;
}
