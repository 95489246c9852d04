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
 * positions p < 0 are empty. `b` = a search hint, a position near the edge of the window (see
 * {@link firstInside}); it only makes the search shorter, never changes a decision.
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
    const n = s.a;
    const end = n % ring.length; // the slot of position n: the one remainder of the decision (see at())
    const q = firstInside(s, ring, end, L, nowMs - lim.windowMs);
    const free = q - (n - L);
    const newest = n > 0 ? at(ring, end, 1) : nowMs;
    // Denied: the cost-th oldest unit is inside the window, and room comes when it leaves.
    const decider = free >= cost ? 0 : at(ring, end, L - cost + 1);
    logOutcome(free, newest, decider, nowMs, cost, lim, out);
  },

  // check() and commit() in one: one remainder, one read of the newest unit.
  consume(s, nowMs, cost, lim, out) {
    const L = lim.limit;
    const ring = s.ring as Float64Array;
    const n = s.a;
    const end = n % ring.length;
    const q = firstInside(s, ring, end, L, nowMs - lim.windowMs);
    const free = q - (n - L);
    const newest = n > 0 ? at(ring, end, 1) : nowMs;
    const decider = free >= cost ? 0 : at(ring, end, L - cost + 1);
    logOutcome(free, newest, decider, nowMs, cost, lim, out);
    if (free >= cost) {
      append(s, ring, end, Math.max(nowMs, newest), cost, L);
      s.b = q; // the next hint: only an admission moves it, a denial leaves the state as it was
    }
  },

  commit(s, nowMs, cost, lim) {
    const ring = s.ring as Float64Array;
    const end = s.a % ring.length;
    // Keep the ring sorted even if a clock steps back: log such a unit at the newest time seen.
    const t = s.a > 0 ? Math.max(nowMs, at(ring, end, 1)) : nowMs;
    // The next hint, as consume() sets it: where the edge of the window is before these units (the
    // check before this commit found the same position; from the current hint it is a few reads).
    const q = firstInside(s, ring, end, lim.limit, nowMs - lim.windowMs);
    append(s, ring, end, t, cost, lim.limit);
    s.b = q;
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
 * admitted now (the empty positions and those before {@link firstInside}'s answer); `newest`,
 * the time of the newest unit (`nowMs` for an empty log); `decider`, when `free < cost`, the
 * time of the cost-th oldest unit of the ring. Shared with the Redis store, whose script finds
 * these numbers in the key and replies with them.
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

/**
 * Logs `cost` units at `t` from position n (slot `end`), growing the ring first if it is short of
 * room and of `limit` (see the top of this file).
 */
function append(s: LimitState, ring: Float64Array, end: number, t: number, cost: number, L: number): void {
  const n = s.a;
  if (n + cost > ring.length && ring.length < L) {
    ring = grow(s, Math.min(L, Math.max(2 * ring.length, n + cost)));
    end = n; // no wrap yet: n <= the old length < the new one
  }
  const C = ring.length;
  for (let i = 0; i < cost; i++) {
    ring[end] = t;
    if (++end === C) end = 0;
  }
  s.a = n + cost;
}

/** Replaces the ring with one of `capacity` slots holding the same units (no wrap yet: n <= old length). */
function grow(s: LimitState, capacity: number): Float64Array {
  const ring = new Float64Array(capacity);
  ring.set(s.ring as Float64Array);
  s.ring = ring;
  return ring;
}

/**
 * The first position whose unit is inside the window (`n` if none): the units before it, and the
 * empty positions, are the free ones. The ring is sorted, so the answer is unique whatever the
 * search path. It starts from the hint `s.b`, the answer of the key's last admission: under
 * steady traffic the edge of the window has moved a few positions at most since then, so a
 * decision reads two or three neighbouring slots here, instead of bisecting all `limit`
 * positions (with a large limit, 20 reads spread over megabytes, and a remainder each). Other
 * cases take {@link search}. Kept small, so that the whole decision still inlines into the
 * store's consume (see evaluate.ts).
 */
function firstInside(s: LimitState, ring: Float64Array, end: number, L: number, cutoff: number): number {
  const n = s.a;
  const lo = n > L ? n - L : 0; // positions below n - L have left the ring; below 0, empty
  let q = s.b;
  if (q >= lo && q <= n && (q === lo || at(ring, end, n - q + 1) <= cutoff)) {
    // Everything before the hint is free: the edge is at the hint or after it.
    const stop = Math.min(n, q + 4);
    while (q < stop && at(ring, end, n - q) <= cutoff) q++;
    if (q < stop || q === n) return q;
  }
  return search(s, ring, end, L, cutoff);
}

/**
 * {@link firstInside} in general: from the hint (any position; one outside `(n - L, n]` is
 * ignored), gallop forward, then bisect, as the Redis script's slFirstInside does; without a
 * usable hint, bisect.
 */
function search(s: LimitState, ring: Float64Array, end: number, L: number, cutoff: number): number {
  const n = s.a;
  let lo = n > L ? n - L : 0; // positions below n - L have left the ring; below 0, empty
  let hi = n;
  const h = s.b;
  if (h > lo && h <= n) {
    if (at(ring, end, n - h + 1) > cutoff) hi = h - 1;
    else {
      // The edge is at or after the hint: gallop forward from it, then bisect what is left.
      lo = h;
      for (let step = 1; lo < hi; step *= 2) {
        const p = Math.min(lo + step - 1, hi - 1);
        if (at(ring, end, n - p) > cutoff) {
          hi = p;
          break;
        }
        lo = p + 1;
      }
    }
  }
  while (lo < hi) {
    const mid = lo + ((hi - lo) >>> 1);
    if (at(ring, end, n - mid) <= cutoff) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The time of position n - d (1 <= d <= min(n, L)), given `end`, the slot of position n
 * (n % C). Counting back from `end` wraps at most once, so there is no remainder per read:
 * an integer division costs more than the rest of a read from cache.
 */
function at(ring: Float64Array, end: number, d: number): number {
  const j = end - d;
  return ring[j < 0 ? j + ring.length : j] as number;
}
