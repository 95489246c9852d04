import type { Outcome } from "../decision.js";
import type { ResolvedLimit } from "../options.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * Sliding log (the sorted-set limiter of ClassDojo's "rolling rate limiter" post): exact. Admits `cost` at `now` only
 * if at most `limit - cost` admitted units have timestamps in `(now - windowMs, now]`. Rejected
 * requests are not logged, so a client that keeps knocking is not locked out forever.
 *
 * No sorted set: the last `limit` admitted timestamps sit in a ring, oldest first, one entry per
 * cost unit (8 bytes each). The `cost`-th oldest entry decides, so a decision reads one entry,
 * not the whole log.
 *
 * State: `a` = total cost units ever admitted (n); `ring[p % C]` holds the timestamp of unit p,
 * where C is the ring's length (its capacity). Units p < n - limit have fallen out of the ring;
 * positions p < 0 are empty.
 *
 * The ring grows on demand: it starts with {@link FIRST_CAPACITY} slots and doubles when a commit
 * needs more, up to `limit`. So C >= min(n, limit) always: while C < limit no unit has ever been
 * overwritten (n <= C, positions never wrap), and at C = limit it is the full ring. Decisions are
 * the same as with a ring of `limit` slots from the start; only memory differs: a key that saw a
 * few requests holds a few slots, not `limit` of them (8 KB at a limit of 1000).
 */
export const slidingLog: Algorithm = {
  init: (lim) => ({ a: 0, b: 0, ring: new Float64Array(Math.min(lim.limit, FIRST_CAPACITY)) }),

  check(s, nowMs, cost, lim, out) {
    const L = lim.limit;
    const ring = s.ring as Float64Array;
    const C = ring.length;
    const cutoff = nowMs - lim.windowMs; // a unit logged at t <= cutoff is outside the window
    const free = freeUnits(s, L, cutoff);
    const newest = s.a > 0 ? (ring[(s.a - 1) % C] as number) : nowMs;
    // Denied: the cost-th oldest unit is inside the window, and room comes when it leaves.
    const decider = free >= cost ? 0 : (ring[(s.a - L + cost - 1) % C] as number);
    logOutcome(free, newest, decider, nowMs, cost, lim, out);
  },

  consume(s, nowMs, cost, lim, out) {
    slidingLog.check(s, nowMs, cost, lim, out);
    if (out.allowed) slidingLog.commit(s, nowMs, cost, lim);
  },

  commit(s, nowMs, cost, lim) {
    const L = lim.limit;
    let ring = s.ring as Float64Array;
    // Keep the ring sorted even if a clock steps back: log such a unit at the newest time seen.
    const t = s.a > 0 ? Math.max(nowMs, ring[(s.a - 1) % ring.length] as number) : nowMs;
    if (s.a + cost > ring.length && ring.length < L) ring = grow(s, Math.min(L, Math.max(2 * ring.length, s.a + cost)));
    const C = ring.length;
    for (let i = 0; i < cost; i++) ring[(s.a + i) % C] = t;
    s.a += cost;
  },

  refund(s, _nowMs, cost, lim) {
    const L = lim.limit;
    const W = lim.windowMs;
    const ring = s.ring as Float64Array;
    const C = ring.length;
    const c = Math.min(cost, s.a, L);
    if (c === 0) return;
    const n = s.a - c;
    // The refunded units n .. n+c-1 were the newest. Their slots now stand again for units
    // n-L .. n-L+c-1, whose timestamps the refunded units overwrote. A commit only overwrites units
    // that are outside the window (commit follows a check that found them free), so unit n-L+i was
    // logged at or before (time of unit n+i) - window. Restoring it as
    // min(that bound, oldest unit still known) keeps the ring sorted, is never earlier than the truth,
    // and is outside the window at every time from its overwrite on, exactly like the truth: the log
    // then decides as if the refunded units had never been admitted. (While the ring is smaller
    // than `limit`, nothing was ever overwritten: every p below is negative, nothing to restore.)
    const oldestKnown = c < L ? (ring[(n + c) % C] as number) : Number.POSITIVE_INFINITY;
    for (let i = 0; i < c; i++) {
      const p = n - L + i;
      if (p >= 0) ring[p % C] = Math.min((ring[(n + i) % C] as number) - W, oldestKnown);
    }
    s.a = n;
  },
};

/**
 * A check's outcome from the three numbers it reads of the log: `free`, the units that could be
 * admitted now ({@link freeUnits}); `newest`, the time of the newest unit (`nowMs` for an empty
 * log); `decider`, when `free < cost`, the time of the cost-th oldest unit of the ring. Shared
 * with the Redis store, whose script finds these numbers in the key and replies with them.
 */
export function logOutcome(
  free: number,
  newest: number,
  decider: number,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
): void {
  out.delayMs = 0;
  if (free >= cost) {
    out.allowed = true;
    out.remaining = free - cost;
    out.retryAfterMs = 0;
    // The units logged now are the last to leave. commit() logs them at the newest time seen
    // when the clock has stepped back, so count from there: the store expires the key on this.
    out.resetAfterMs = Math.max(newest - nowMs, 0) + lim.windowMs;
    return;
  }
  out.allowed = false;
  out.remaining = free;
  out.retryAfterMs = decider + lim.windowMs - nowMs;
  out.resetAfterMs = newest + lim.windowMs - nowMs;
}

/** Slots of a new key's ring (64 bytes: V8 keeps a typed array this small inside the JS heap). */
export const FIRST_CAPACITY = 8;

/** Replaces the ring with one of `capacity` slots holding the same units (no wrap yet: n <= old length). */
function grow(s: LimitState, capacity: number): Float64Array {
  const ring = new Float64Array(capacity);
  ring.set(s.ring as Float64Array);
  s.ring = ring;
  return ring;
}

/**
 * Cost units that could be admitted now: ring entries that are empty or outside the window.
 * The ring is sorted, so a binary search over the positions finds the first unit still inside.
 */
function freeUnits(s: LimitState, L: number, cutoff: number): number {
  const ring = s.ring as Float64Array;
  const C = ring.length;
  const n = s.a;
  // Positions n-L .. n-1, oldest first; j counts from the oldest. Empty (p < 0) is free.
  let lo = Math.max(0, L - n); // first j whose position holds a unit
  let hi = L;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ring[(n - L + mid) % C] as number) <= cutoff) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
