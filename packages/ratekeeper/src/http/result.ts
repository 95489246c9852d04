import type { Lease } from "../concurrency.js";
import type { Decision } from "../core/decision.js";
import { PROBLEM_CONTENT_TYPE, type ProblemDetails } from "./problem.js";

/**
 * The verdict on one request, for an adapter to apply: set `headers`; if `pass` is false answer
 * `status` with `body`; otherwise wait `delayMs` (through `HttpRateLimiter.hold`) and pass
 * on, then call `HttpRateLimiter.settle` when the response is done.
 */
export interface RateLimitResult {
  readonly pass: boolean;
  /** 429, 403, 500 or 503 when `pass` is false; 0 otherwise. */
  readonly status: number;
  readonly headers: [string, string][];
  /** The problem details to send when `pass` is false (JSON in `body`). */
  readonly problem: ProblemDetails | undefined;
  readonly body: string | undefined;
  readonly contentType: string;
  /** How long to hold the request before passing it on (shaping). */
  readonly delayMs: number;
  readonly decision: Decision | undefined;
  readonly key: string | undefined;
  readonly cost: number;
  /** Whether `HttpRateLimiter.settle` has work to do (a `countOnly` refund, a lease to release). */
  readonly settles: boolean;
  /** The request's lease (option `concurrency`), released by `settle` (or when a held request's client leaves). */
  readonly lease: Lease | undefined;
}

/** The answer for a request that is not limited at all (skipped, or on the allow list). */
export const PASS: RateLimitResult = Object.freeze({
  pass: true,
  status: 0,
  headers: [],
  problem: undefined,
  body: undefined,
  contentType: PROBLEM_CONTENT_TYPE,
  delayMs: 0,
  decision: undefined,
  key: undefined,
  cost: 0,
  settles: false,
  lease: undefined,
});

/** An admitted request's result: pass on after `delayMs`. */
export function admission(
  headers: [string, string][],
  delayMs: number,
  decision: Decision,
  key: string,
  cost: number,
  settles: boolean,
): RateLimitResult {
  return {
    pass: true,
    status: 0,
    headers,
    problem: undefined,
    body: undefined,
    contentType: PROBLEM_CONTENT_TYPE,
    delayMs,
    decision,
    key,
    cost,
    settles,
    lease: undefined,
  };
}

/**
 * A refusal: `problem.status` with the problem as a JSON body. A 429 gets `Retry-After`
 * (RFC 9110 section 10.2.3, delay-seconds), rounded up so a client that obeys is never early;
 * it equals the `t` / `reset` of the limit that denied in every header style. `body` is the
 * problem as JSON (given when the caller has it already); `addRetryAfter` false when the caller
 * has pushed its own (kept) `Retry-After` pair.
 */
export function refusal(
  problem: ProblemDetails,
  headers: [string, string][],
  decision?: Decision,
  key?: string,
  cost = 0,
  body: string = JSON.stringify(problem),
  addRetryAfter = true,
): RateLimitResult {
  if (addRetryAfter && problem.status === 429 && problem["retry-after"] !== undefined)
    headers.push(["Retry-After", String(problem["retry-after"])]);
  return {
    pass: false,
    status: problem.status,
    headers,
    problem,
    body,
    contentType: PROBLEM_CONTENT_TYPE,
    delayMs: 0,
    decision,
    key,
    cost,
    settles: false,
    lease: undefined,
  };
}
