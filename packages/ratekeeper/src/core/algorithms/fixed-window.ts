import type { Outcome } from "../decision.js";
import type { ResolvedLimit } from "../options.js";
import { mod } from "../arith.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * Fixed window counters: one counter per window; the counter starts again
 * at 0 when the window ends. Windows start at multiples of `windowMs` (`align: "clock"`) or at
 * the key's first request (`align: "first-request"`).
 *
 * State: `a` = start of the current window (ms), `b` = cost admitted in it.
 * Worst case: `2 * limit` in a span just over the boundary (`limit` at 12:00:59 and `limit` more at 12:01:00).
 */
export const fixedWindow: Algorithm = {
  init: () => ({ a: 0, b: 0, ring: null }),

  check(s, nowMs, cost, lim, out) {
    decide(s, nowMs, cost, lim, out, false);
  },

  consume(s, nowMs, cost, lim, out) {
    decide(s, nowMs, cost, lim, out, true);
  },

  commit(s, nowMs, cost, lim) {
    const start = windowStart(s, nowMs, lim);
    s.b = (s.a === start ? s.b : 0) + cost;
    s.a = start;
  },

  refund(s, nowMs, cost, lim) {
    if (s.a === windowStart(s, nowMs, lim)) s.b = Math.max(0, s.b - cost);
  },
};

/** `check`, and when `commit` and allowed, `commit` too. */
function decide(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit, out: Outcome, commit: boolean): void {
  const start = windowStart(s, nowMs, lim);
  const count = s.a === start ? s.b : 0;
  const endsIn = start + lim.windowMs - nowMs;
  out.resetAfterMs = endsIn;
  out.delayMs = 0;
  if (count + cost <= lim.limit) {
    out.allowed = true;
    out.remaining = lim.limit - count - cost;
    out.retryAfterMs = 0;
    if (commit) {
      s.b = count + cost;
      s.a = start;
    }
  } else {
    out.allowed = false;
    out.remaining = lim.limit - count;
    out.retryAfterMs = endsIn; // the next window starts empty, and cost <= limit
  }
}

/**
 * The start of the window `nowMs` counts in. A clock that stepped back into an earlier window
 * still counts in the newest window seen (`s.a`): otherwise it would open a fresh count there and
 * overwrite the newer one, admitting up to `limit` more within the newer window.
 */
export function windowStart(s: LimitState, nowMs: number, lim: ResolvedLimit): number {
  if (lim.alignFirst) return s.b > 0 && nowMs - s.a < lim.windowMs ? s.a : nowMs;
  return Math.max(nowMs - mod(nowMs, lim.windowMs), s.a);
}

/** decide(), for the memory store, which calls it directly (stores/memory-kinds.ts). */
export { decide as decideFixed };
