/**
 * ratekeeper: rate limiting for TypeScript and Node.js.
 * @example
 * import { RateLimiter } from "ratekeeper";
 * const limiter = new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", burst: 5 });
 * const d = await limiter.consume("user:42");
 */
export { RateLimiter, type RateLimiterOptions } from "./limiter.js";
export { MemoryStore, type MemoryStoreOptions } from "./stores/memory.js";
export { ConcurrencyLimiter, type ConcurrencyLimiterOptions, type Lease, type LeaseCount } from "./concurrency.js";
export type { LeaseReason } from "./core/lease-reason.js";
export type { Store, BoundStore, BoundLeases, LeaseAnswer, BindOptions, ClockOptions } from "./store.js";
export type { LeaseOptions, ResolvedLease } from "./core/lease-options.js";
export type { Decision, DecisionReason, LimitOutcome, Outcome } from "./core/decision.js";
export { collectIssues, RateLimitConfigError, RateLimitStoreError, type ConfigIssue } from "./core/errors.js";
export { parseDuration, type Duration } from "./core/duration.js";
export { MAX_TIMER_MS } from "./core/max-timer.js";
export {
  ALGORITHMS,
  resolveLimit,
  resolveLimits,
  type AlgorithmName,
  type LimitSpec,
  type ResolvedLimit,
  type FixedWindowSpec,
  type SlidingLogSpec,
  type SlidingWindowSpec,
  type TokenBucketSpec,
  type LeakyBucketSpec,
  type GcraSpec,
} from "./core/options.js";
export type { Algorithm, LimitState } from "./core/algorithms/index.js";
export { policyId } from "./core/policy-id.js";
