import type { ResolvedLimit } from "./options.js";

/**
 * Why a decision came out as it did, when it was not a plain allow:
 * - `limit`: a limit had no room for the cost.
 * - `denial-cache`: answered locally from the store's cache of recent denials (no store call).
 * - `overloaded`: the store already held as many decisions waiting for it as it may
 *   (backpressure); denied at once rather than growing the backlog.
 * - `degraded`: the store was down; this process decided alone at its share of the limit, and
 *   what it admitted is charged to the store when it answers again.
 * - `store-error`: the store was down; the failure policy decided (`"open"` / `"closed"`).
 * - `insurance`: the store was down and the insurance store decided.
 */
export type DecisionReason = "limit" | "denial-cache" | "overloaded" | "degraded" | "store-error" | "insurance";

/** What one limit said, when a limiter has several. Times in integer milliseconds. */
export interface LimitOutcome {
  readonly name: string;
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly retryAfterMs: number;
  readonly resetAfterMs: number;
  readonly windowMs: number;
}

/**
 * The answer to a consume or a peek. A denial is a decision, never an exception.
 * All times are integer milliseconds.
 */
export interface Decision {
  /** Whether the request may proceed (after `delayMs`, when shaping). */
  readonly allowed: boolean;
  /** The limit of the policy that decided. */
  readonly limit: number;
  /** Cost units that could still be admitted right now. */
  readonly remaining: number;
  /** 0 when allowed; otherwise how long until the same request would be allowed if nothing else happened. */
  readonly retryAfterMs: number;
  /** How long until the key is back to its full allowance with no further requests. */
  readonly resetAfterMs: number;
  /** Leaky bucket in `shape` mode: how long to hold the request before passing it on. */
  readonly delayMs: number;
  /** Set on denials and on decisions the store's failure policy made. */
  readonly reason: DecisionReason | undefined;
  /** Index (in the limiter's `limits`) of the limit that decided. */
  readonly policy: number;
  /** Name of the limit that decided. */
  readonly policyName: string;
  /** Window of the limit that decided, in ms (for headers such as `RateLimit-Policy`). */
  readonly windowMs: number;
  /** With several limits: what each said, in order. Absent with one limit. */
  readonly limits: readonly LimitOutcome[] | undefined;
}

/**
 * Scratch space an algorithm writes its verdict into: reused per call, so the hot path
 * allocates nothing but the returned {@link Decision}.
 */
export interface Outcome {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
  resetAfterMs: number;
  delayMs: number;
}

/** A fresh scratch {@link Outcome}. */
export function newOutcome(): Outcome {
  return { allowed: false, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, delayMs: 0 };
}

/**
 * The one way to build a {@link Decision}: from an outcome, the limit that decided, its index and
 * (with several limits) what each said. A denial's reason is `"limit"`; a store that decided
 * otherwise (its failure policy, its denial cache) sets its own reason on a copy.
 *
 * Every Decision is made here, so every one has the same keys in the same order: one hidden class
 * in V8, and monomorphic property reads in the code that consumes decisions.
 */
export function newDecision(o: Outcome, lim: ResolvedLimit, policy: number, limits: readonly LimitOutcome[] | undefined): Decision {
  const allowed = o.allowed;
  return {
    allowed,
    limit: lim.limit,
    remaining: o.remaining,
    retryAfterMs: o.retryAfterMs,
    resetAfterMs: o.resetAfterMs,
    delayMs: o.delayMs,
    reason: allowed ? undefined : "limit",
    policy,
    policyName: lim.name,
    windowMs: lim.windowMs,
    limits,
  };
}
