import type { Outcome } from "../decision.js";
import type { ResolvedLimit } from "../options.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * Sliding log (the sorted-set limiter of ClassDojo's "rolling rate limiter" post): exact. Admits `cost` at `now` only
 * if at most `limit - cost` admitted units have timestamps in `(now - windowMs, now]`. Rejected
 * requests are not logged, so a client that keeps knocking is not locked out forever.
 *
 * No sorted set: the newest admitted timestamps sit in a ring, oldest first, one entry per cost
 * unit (8 bytes each). The `cost`-th oldest unit that can count decides, so a decision reads one
 * entry, not the whole log.
 *
 * State: `a` = n, the cost units admitted (less those refunded); unit p (0 <= p < n) has its time
 * in `ring[p % C]`, where C, the ring's capacity, is its length less one. The last slot,
 * `ring[C]`, holds the high-water mark: the newest time a unit was logged at. Units p < n - C
 * have left the ring; positions p < 0 are empty. `b` = a search hint, a position near the edge
 * of the window (see {@link firstInside}); it only makes the search shorter, never changes a
 * decision.
 *
 * A clock that steps back: while the log holds units, a decision at `nowMs` is made as at the
 * high-water mark when that is later (as the other algorithms decide as at their newest time),
 * and commit() logs the units at that time; waits are counted from `nowMs`, so they stay
 * truthful on the caller's clock. A refund takes back the newest units but leaves the high-water
 * mark. So the window's start never moves back while the log holds units: a unit that was outside
 * the window once stays outside for every later decision. (An empty log decides at `nowMs`; it
 * has no unit to keep outside.)
 *
 * That is what lets the ring wrap before it has `limit` slots: a commit overwrites the oldest
 * units only when they are outside the window, and otherwise first grows the ring (doubling, and
 * at least to the units inside plus the new ones; never past `limit`, as an admission leaves at
 * most `limit` units inside). Every unit that left the ring is outside for good, so decisions are
 * those of a log that keeps every unit, and a key holds about twice its busiest window (a key
 * that logs one unit a minute under 1,000 per hour keeps 63 slots, not 1,000), starting from
 * {@link FIRST_CAPACITY}.
 */
export const slidingLog: Algorithm = {
  init: (lim) => ({ a: 0, b: 0, ring: new Float64Array(Math.min(lim.limit, FIRST_CAPACITY) + 1) }),

  check(s, nowMs, cost, lim, out) {
    const ring = s.ring as Float64Array;
    const off = 0;
    const C = ring.length - 1;
    const n = s.a;
    const end = n % C; // the slot of position n: the one remainder of the decision (see at())
    const high = ring[off + C] as number;
    const t = n > 0 && high > nowMs ? high : nowMs; // the time the decision is made as
    if (fullDenial(s, ring, off, C, end, t, nowMs, cost, lim, out)) return;
    const L = lim.limit;
    const q = firstInside(s, ring, off, C, end, t - lim.windowMs);
    const free = q - (n - L);
    if (free >= cost) logOutcome(free, t, 0, nowMs, cost, lim, out);
    // Denied: the cost-th oldest unit that counts is inside the window, and room comes when it leaves.
    else logOutcome(free, at(ring, off, C, end, 1), at(ring, off, C, end, L - cost + 1), nowMs, cost, lim, out);
  },

  // check() and commit() in one: one remainder, one search.
  consume(s, nowMs, cost, lim, out) {
    const ring = s.ring as Float64Array;
    consumeIn(s, ring, 0, ring.length - 1, nowMs, cost, lim, out);
  },

  commit(s, nowMs, cost, lim) {
    const ring = s.ring as Float64Array;
    const off = 0;
    const C = ring.length - 1;
    const n = s.a;
    const end = n % C;
    const high = ring[off + C] as number;
    const t = n > 0 && high > nowMs ? high : nowMs;
    // Where the edge of the window is before these units: the check before this commit found the
    // same position (from the current hint it is a few reads). It is the next hint, and tells
    // append() how many units are inside.
    const q = firstInside(s, ring, off, C, end, t - lim.windowMs);
    append(s, ring, off, C, end, t, cost, n + cost - q, lim.limit);
    s.b = q;
  },

  refund(s, _nowMs, cost, lim) {
    const ring = s.ring as Float64Array;
    const C = ring.length - 1;
    const n = s.a;
    const left = n - Math.min(cost, n, lim.limit);
    // The refunded units (positions left .. n-1) were the newest; positions left-C .. left-1 make
    // up the ring again. Those below n - C had left it: their units were outside the window then, and stay
    // outside for every later decision (the high-water mark stays). -Infinity stands for each of
    // them exactly, and keeps the ring sorted. The log then decides as if the refunded units had
    // never been admitted.
    const stop = Math.min(left, n - C);
    for (let p = Math.max(0, left - C); p < stop; p++) ring[p % C] = Number.NEGATIVE_INFINITY;
    s.a = left;
  },
};

/**
 * `consume` on a log whose ring is the `C + 1` numbers of `ring` from `off`: the state's own ring
 * (off 0), or a memory store's row (stores/memory-kinds.ts LogRowTable: a key's first ring kept in
 * its index's rows, so that its address needs nothing from the state). A ring that must grow is
 * copied into one of the state's own (`s.ring`); the caller then reads that.
 */
export function consumeIn(
  s: LimitState,
  ring: Float64Array,
  off: number,
  C: number,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
): void {
  const n = s.a;
  const end = n % C;
  const high = ring[off + C] as number;
  const t = n > 0 && high > nowMs ? high : nowMs;
  if (fullDenial(s, ring, off, C, end, t, nowMs, cost, lim, out)) return;
  const L = lim.limit;
  const q = firstInside(s, ring, off, C, end, t - lim.windowMs);
  const free = q - (n - L);
  if (free >= cost) {
    logOutcome(free, t, 0, nowMs, cost, lim, out);
    append(s, ring, off, C, end, t, cost, n + cost - q, L);
    s.b = q; // the next hint: only an admission moves it, a denial leaves the state as it was
  } else logOutcome(free, at(ring, off, C, end, 1), at(ring, off, C, end, L - cost + 1), nowMs, cost, lim, out);
}

/**
 * A check's outcome from the three numbers it reads of the log: `free`, the units that could be
 * admitted now (the empty positions and those before {@link firstInside}'s answer); `newest`: for
 * an admission, the time its units are logged at (the high-water mark when the clock is behind
 * it, else `nowMs`), for a denial the time of the newest unit; `decider`, when `free < cost`, the
 * time of the cost-th oldest unit that counts. Shared with the Redis store, whose script finds
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
    // The units logged now are the last to leave, at `newest` + window: the store expires the key on this.
    out.resetAfterMs = Math.max(newest - nowMs, 0) + lim.windowMs;
    return;
  }
  out.allowed = false;
  out.remaining = free;
  out.retryAfterMs = decider + lim.windowMs - nowMs;
  out.resetAfterMs = newest + lim.windowMs - nowMs;
}

/** Units of a new key's ring: with the high-water mark, 8 slots (64 bytes: V8 keeps a typed array this small inside the JS heap). */
export const FIRST_CAPACITY = 7;

/**
 * Logs `cost` units at `t` from position n (slot `end`). `need`: the units inside the window
 * after them; when that is more than the ring holds, it grows first (see the top of this file),
 * so the slots overwritten below only ever held units outside the window.
 */
function append(
  s: LimitState,
  ring: Float64Array,
  off: number,
  C: number,
  end: number,
  t: number,
  cost: number,
  need: number,
  L: number,
): void {
  if (need > C) {
    ring = grow(s, ring, off, C, Math.min(L, Math.max(2 * C + 1, need)));
    off = 0;
    C = ring.length - 1;
    end = s.a % C;
  }
  for (let i = 0; i < cost; i++) {
    ring[off + end] = t;
    if (++end === C) end = 0;
  }
  ring[off + C] = t;
  s.a += cost;
}

/**
 * Replaces the ring with one of `capacity` units holding the same ones at their new slots, and
 * the high-water mark. The units that had left the old ring and fall inside the new one's reach
 * are outside the window for good: -Infinity stands for them (see refund()).
 */
function grow(s: LimitState, ring: Float64Array, off: number, C: number, capacity: number): Float64Array {
  const n = s.a;
  const kept = Math.max(0, n - C);
  const next = new Float64Array(capacity + 1);
  for (let p = Math.max(0, n - capacity); p < kept; p++) next[p % capacity] = Number.NEGATIVE_INFINITY;
  for (let p = kept; p < n; p++) next[p % capacity] = ring[off + (p % C)] as number;
  next[capacity] = ring[off + C] as number;
  s.ring = next;
  return next;
}

/**
 * A denial decided without searching for the edge of the window: returns false, writing nothing,
 * when it cannot tell. The ring is sorted, so a request of `cost` is denied exactly when the unit
 * `d = limit - cost + 1` positions before n (the decider) is in the ring and inside the window;
 * when the unit before it is not (outside, left the ring, or none), the decider is the first unit
 * inside ({@link firstInside}'s answer is its position, n - d), and `free` is limit - d = cost - 1.
 * For cost 1 that is the common case: at most `limit` units are ever inside the window (an
 * admission leaves at most `limit`, and the window's start never moves back while the log holds
 * units). Tried only when the hint (the edge at the last admission) is at or before the decider:
 * otherwise the edge, which only moves forward, is past the decider and the request is admitted
 * (or a refund left the hint past n), and under steady admissions the decider is far behind the
 * edge, where reading it would be a cache miss on a large ring.
 *
 * A cost above the limit (d < 1: no decider, the position would be past the ring's slots, in
 * a memory store's next row) is always a denial: {@link overLimit}. Every store refuses such a
 * cost before it gets here (core/max-cost.ts); the guard keeps this function's reads inside the
 * log whoever calls it.
 */
function fullDenial(
  s: LimitState,
  ring: Float64Array,
  off: number,
  C: number,
  end: number,
  t: number,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
): boolean {
  const d = lim.limit - cost + 1;
  if (d < 1) {
    overLimit(s, ring, off, C, end, t, nowMs, lim, out);
    return true;
  }
  const p = s.a - d; // the decider's position
  if (p < s.b || p < 0 || d > C) return false;
  const cutoff = t - lim.windowMs;
  const decider = at(ring, off, C, end, d);
  if (decider <= cutoff || (p > 0 && d < C && at(ring, off, C, end, d + 1) > cutoff)) return false;
  logOutcome(cost - 1, d === 1 ? decider : at(ring, off, C, end, 1), decider, nowMs, cost, lim, out);
  return true;
}

/**
 * A cost above the limit, which no wait admits (at most `limit - cost` < 0 units may be inside
 * the window). RateLimiter and the stores refuse it with a RangeError (core/max-cost.ts), so no
 * decision of theirs comes from here; a caller of this core function itself gets a denial that
 * reads only this log and writes nothing: `remaining` the units free now, and both waits the time
 * until the log holds nothing inside the window (0 for an empty log).
 */
function overLimit(
  s: LimitState,
  ring: Float64Array,
  off: number,
  C: number,
  end: number,
  t: number,
  nowMs: number,
  lim: ResolvedLimit,
  out: Outcome,
): void {
  const n = s.a;
  const free = firstInside(s, ring, off, C, end, t - lim.windowMs) - (n - lim.limit);
  const clear = n > 0 ? Math.max(0, at(ring, off, C, end, 1) + lim.windowMs - nowMs) : 0;
  out.allowed = false;
  out.remaining = free;
  out.retryAfterMs = clear;
  out.resetAfterMs = clear;
  out.delayMs = 0;
}

/**
 * The first position whose unit is inside the window (`n` if none): the units before it, and the
 * empty positions, are the free ones. The ring is sorted, so the answer is unique whatever the
 * search path. It starts from the hint `s.b`, the answer of the key's last admission: under
 * steady traffic the edge of the window has moved a few positions at most since then, so a
 * decision reads two or three neighbouring slots here, instead of bisecting the whole ring
 * (with a large ring, 20 reads spread over megabytes). Other cases take {@link search}. Kept
 * small, so that the whole decision still inlines into the store's consume (see evaluate.ts).
 */
function firstInside(s: LimitState, ring: Float64Array, off: number, C: number, end: number, cutoff: number): number {
  const n = s.a;
  const lo = n > C ? n - C : 0; // positions below n - C have left the ring (outside); below 0, empty
  let q = s.b;
  if (q >= lo && q <= n && (q === lo || at(ring, off, C, end, n - q + 1) <= cutoff)) {
    // Everything before the hint is free: the edge is at the hint or after it.
    const stop = Math.min(n, q + 4);
    while (q < stop && at(ring, off, C, end, n - q) <= cutoff) q++;
    if (q < stop || q === n) return q;
  }
  return search(s, ring, off, C, end, cutoff);
}

/**
 * {@link firstInside} in general: from the hint (any position; one outside `(n - C, n]` is
 * ignored), gallop forward, then bisect, as the Redis script's slFirstInside does; without a
 * usable hint, bisect.
 */
function search(s: LimitState, ring: Float64Array, off: number, C: number, end: number, cutoff: number): number {
  const n = s.a;
  let lo = n > C ? n - C : 0;
  let hi = n;
  const h = s.b;
  if (h > lo && h <= n) {
    if (at(ring, off, C, end, n - h + 1) > cutoff) hi = h - 1;
    else {
      // The edge is at or after the hint: gallop forward from it, then bisect what is left.
      lo = h;
      for (let step = 1; lo < hi; step *= 2) {
        const p = Math.min(lo + step - 1, hi - 1);
        if (at(ring, off, C, end, n - p) > cutoff) {
          hi = p;
          break;
        }
        lo = p + 1;
      }
    }
  }
  while (lo < hi) {
    const mid = lo + ((hi - lo) >>> 1);
    if (at(ring, off, C, end, n - mid) <= cutoff) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The time of position n - d (1 <= d <= min(n, C)), given `end`, the slot of position n (n % C).
 * Counting back from `end` wraps at most once, so there is no remainder per read: an integer
 * division costs more than the rest of a read from cache.
 */
function at(ring: Float64Array, off: number, C: number, end: number, d: number): number {
  const j = end - d;
  return ring[off + (j < 0 ? j + C : j)] as number;
}
