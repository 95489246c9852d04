import { newDecision, type Decision, type Outcome } from "../../core/decision.js";
import type { RateLimitStoreError } from "../../core/errors.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BoundStore, ClockOptions } from "../../store.js";

/**
 * What a Redis-backed store (RedisStore, HttpRedisStore) answers when Redis did not answer a
 * consume or peek: the failure policy decides. One place for both stores, so that a Node server
 * and an edge function on one Redis fail the same way.
 */

/** The retryAfterMs of a denial made without Redis: about when a retry may find it back. */
export const RETRY_WHEN_DOWN_MS = 1000;

/** A decision made without Redis and without a local store: `"open"`/`"closed"`, or backpressure. */
export function withoutRedis(limits: readonly ResolvedLimit[], reason: "overloaded" | "store-error", allowed: boolean): Decision {
  const waitMs = allowed ? 0 : RETRY_WHEN_DOWN_MS;
  const o: Outcome = { allowed, remaining: 0, retryAfterMs: waitMs, resetAfterMs: waitMs, delayMs: 0 };
  return { ...newDecision(o, limits[0] as ResolvedLimit, 0, undefined), reason };
}

/** A consume or peek as a Redis-backed store's table runs it; when Redis does not answer, the failure policy gets it. */
export interface DecisionCall {
  op: "consume" | "peek";
  key: string;
  cost: number;
  nowMs: number | undefined;
  maxDelayMs: number | undefined;
}

/** A local store standing in for Redis (insurance, or the degraded limiter). */
type LocalStore = Pick<BoundStore, "consume" | "peek">;

/**
 * The failure policy's decision: `"throw"` rejects with `err()` (made only then: see
 * table-fallback.ts); `"open"`/`"closed"` admit/deny
 * with `reason: "store-error"`; otherwise `local()` decides (an insurance store's decisions get
 * `reason: "insurance"`; the degraded limiter names its own reason).
 */
export async function decideByPolicy(
  failure: "throw" | "open" | "closed" | "degraded" | object,
  err: () => RateLimitStoreError,
  limits: readonly ResolvedLimit[],
  local: () => LocalStore,
  call: DecisionCall,
): Promise<Decision> {
  if (failure === "throw") throw err();
  if (failure === "open" || failure === "closed") return withoutRedis(limits, "store-error", failure === "open");
  const { op, key, cost, nowMs, maxDelayMs } = call;
  const store = local();
  const d = await (op === "consume" ? store.consume(key, cost, nowMs, maxDelayMs) : store.peek(key, cost, nowMs));
  return failure === "degraded" ? d : { ...d, reason: "insurance" };
}

/**
 * What the failure policy's local stores (insurance, degraded) are told of a binding's clock when
 * they bind for it: `{ injectedClock: true }` when the limiter injects one, since the decisions
 * they serve then carry its times; else nothing (the `lease` option stays with the Redis binding).
 */
export function clockOf(options: ClockOptions | undefined): ClockOptions | undefined {
  return options?.injectedClock === true ? { injectedClock: true } : undefined;
}
