/**
 * The largest cost one request may ask of a policy, and the error for a cost above it: the one
 * rule RateLimiter and every store (memory, Redis, HTTP Redis) apply, so that a cost no state of
 * the policy could ever admit is bad input everywhere (DESIGN.md), never a denial whose wait is
 * not truthful (retrying after it never succeeds).
 */
import type { ResolvedLimit } from "./options.js";

/**
 * The most cost units `limits` could ever admit at once: the smallest `capacity` (`limit` for
 * the windows and the log, `capacity` for token and leaky buckets, `burst + 1` for GCRA). No
 * state of a limit holds more than its capacity, so a larger cost is denied forever.
 * @example maxCostOf(resolveLimits([{ algorithm: "gcra", limit: 10, window: "1s", burst: 4 }])) // 5
 */
export function maxCostOf(limits: readonly ResolvedLimit[]): number {
  return Math.min(...limits.map((l) => l.capacity));
}

/**
 * The RangeError for a cost above {@link maxCostOf}, naming the field, as RateLimiter throws it
 * and a store's `bind()` refuses it.
 * @example costTooHigh(6, 5).message // "cost: 6 is more than this policy could ever admit (at most 5)"
 */
export function costTooHigh(cost: number, maxCost: number): RangeError {
  return new RangeError(`cost: ${cost} is more than this policy could ever admit (at most ${maxCost})`);
}
