/**
 * One call to a limiter's store for the decision service, timed for the metrics: the store's
 * latency, the decision's reason, and failures (a RangeError, a bad key or cost, becomes the
 * caller's CheckError; anything else is the store's own error, counted).
 */
import type { Decision, RateLimiter } from "ratekeeper";
import { CheckError, type DecisionObserver } from "./types.js";

/**
 * Asks the limiter, timing the store call for the metrics; the decision itself when the store
 * answers synchronously (the memory store), else its promise.
 * @throws CheckError for a bad key or cost; the store's own error otherwise
 */
export function timedRun(
  observer: DecisionObserver | undefined,
  limiter: RateLimiter,
  stateKey: string,
  cost: number,
  peek: boolean,
): Decision | Promise<Decision> {
  // No observer (the service embedded without metrics): no clock read at all.
  const t0 = observer !== undefined ? performance.now() : 0;
  let d: Decision | Promise<Decision>;
  try {
    d = peek ? limiter.peek(stateKey, cost) : limiter.consumeNow(stateKey, cost);
  } catch (e) {
    throw storeFailed(observer, e);
  }
  if (d instanceof Promise) {
    return d.then(
      (x) => ran(observer, x, t0),
      (e: unknown) => {
        throw storeFailed(observer, e);
      },
    );
  }
  return ran(observer, d, t0);
}

/** Counts a store call that threw; a RangeError (bad key or cost) becomes the caller's CheckError. */
function storeFailed(observer: DecisionObserver | undefined, e: unknown): unknown {
  observer?.storeError("error");
  return e instanceof RangeError ? new CheckError(e.message) : e;
}

/** Reports a decision's store latency and reason. */
function ran(observer: DecisionObserver | undefined, d: Decision, t0: number): Decision {
  if (observer === undefined) return d;
  observer.storeLatency((performance.now() - t0) / 1000);
  if (d.reason !== undefined) {
    observer.decisionReason?.(d.reason);
    if (d.reason === "store-error" || d.reason === "insurance" || d.reason === "degraded") observer.storeError("failure_policy");
  }
  return d;
}
