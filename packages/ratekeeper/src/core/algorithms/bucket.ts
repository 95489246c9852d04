import type { Outcome } from "../decision.js";
import type { ResolvedLimit } from "../options.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * The one state machine behind the token bucket, the leaky bucket (meter and queue) and GCRA.
 *
 * A bucket of `capacity` cost units drains `limit` units per `windowMs`, continuously and lazily
 * (no background process). To stay in integers the level is kept in units of `cost x windowMs`
 * divided by `g = gcd(windowMs, limit)`: a request of cost `c` adds `c * unitLevel` (`windowMs /
 * g`), and each millisecond drains `drainPerMs` (`limit / g`); both are resolved once per limit
 * (core/options.ts). A request is admitted when it fits: `level + c * unitLevel <= capacity *
 * unitLevel`. Every number decided is a ratio of the level and those two, so `g` changes no
 * decision; it keeps the level small: 1,000 an hour fills at 3.6e6, not 3.6e9, so the memory
 * store keeps it a small integer (stores/memory-time.ts). The Redis store's scripts keep the level
 * in units of `cost x windowMs` (g = 1), and stores/redis/fast-reply.ts decides on their state so.
 *
 * - token bucket: tokens = capacity - level; starts full (level 0), refills `limit` per window.
 * - leaky bucket as a meter (`police`): the same bucket, seen from the other side.
 * - leaky bucket as a queue (`shape`): admits the same requests; a request waits `level / limit`
 *   ms, the time for the first-in-first-out queue ahead of it to drain. A caller that will not
 *   hold a request that long passes `maxDelayMs`: a longer wait is then a denial, decided in the
 *   same step (nothing charged, `retryAfterMs` = how long until the wait fits).
 * - GCRA: the virtual-scheduling form of the same bucket (ITU-T I.371) with capacity `burst + 1`;
 *   a level of `x` is a theoretical arrival time `x / drainPerMs` ms ahead of now (as in
 *   redis-cell).
 *
 * State: `a` = time of the last update (ms), `b` = level at that time (units x unitLevel).
 */
export const bucket: Algorithm = {
  init: () => ({ a: 0, b: 0, ring: null }),

  check(s, nowMs, cost, lim, out, maxDelayMs) {
    decide(s, nowMs, cost, lim, out, false, maxDelayMs);
  },

  consume(s, nowMs, cost, lim, out, maxDelayMs) {
    decide(s, nowMs, cost, lim, out, true, maxDelayMs);
  },

  commit(s, nowMs, cost, lim) {
    s.b = levelAt(s, nowMs, lim) + cost * lim.unitLevel;
    s.a = Math.max(nowMs, s.a);
  },

  refund(s, nowMs, cost, lim) {
    s.b = Math.max(0, levelAt(s, nowMs, lim) - cost * lim.unitLevel);
    s.a = Math.max(nowMs, s.a);
  },
};

/** `check`, and when `commit` and allowed, `commit` too. */
function decide(
  s: LimitState,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
  commit: boolean,
  maxDelayMs: number | undefined,
): void {
  const level = levelAt(s, nowMs, lim);
  // A clock that stepped back (before the last update): decide as at the last update, and
  // count the waits from this earlier reading, so that they stay truthful on this clock.
  const behind = s.a > nowMs ? s.a - nowMs : 0;
  const full = lim.capacity * lim.unitLevel;
  const after = level + cost * lim.unitLevel;
  // Shaping: the wait for the queue ahead to drain. It shrinks by 1 ms per ms whatever the cost,
  // so a request over the caller's longest wait fits again `over` ms later.
  const delay = lim.shape ? Math.ceil(level / lim.drainPerMs) + behind : 0;
  const over = maxDelayMs === undefined ? 0 : delay - maxDelayMs;
  if (after <= full && over <= 0) {
    out.allowed = true;
    out.remaining = Math.floor((full - after) / lim.unitLevel);
    out.retryAfterMs = 0;
    out.resetAfterMs = Math.ceil(after / lim.drainPerMs) + behind;
    out.delayMs = delay;
    if (commit) {
      s.b = after;
      if (behind === 0) s.a = nowMs;
    }
  } else {
    out.allowed = false;
    out.remaining = Math.floor((full - level) / lim.unitLevel);
    out.retryAfterMs = Math.max(after > full ? Math.ceil((after - full) / lim.drainPerMs) + behind : 0, over);
    out.resetAfterMs = Math.ceil(level / lim.drainPerMs) + behind;
    out.delayMs = 0;
  }
}

/** The level at `nowMs`, after draining since the last update. Never multiplies a long idle time. */
export function levelAt(s: LimitState, nowMs: number, lim: ResolvedLimit): number {
  const elapsed = nowMs - s.a;
  if (elapsed <= 0) return s.b;
  if (elapsed >= Math.ceil(s.b / lim.drainPerMs)) return 0;
  return s.b - elapsed * lim.drainPerMs;
}

/** decide(), for the memory store, which calls it directly (stores/memory-kinds.ts). */
export { decide as decideBucket };
