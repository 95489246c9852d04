/**
 * Bodies of the responses the middleware itself sends, as RFC 9457 problem details
 * (`application/problem+json`). A 429 uses the problem type that the IETF RateLimit draft
 * (draft-ietf-httpapi-ratelimit-headers-10, "Problem Types") registers for a client over its
 * quota, with its `violated-policies` member naming the policies that denied.
 */

/** The media type of the bodies (RFC 9457 section 3). */
export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** Problem type of the IETF RateLimit draft: the client exceeded a quota policy. */
export const QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/** A problem details object (RFC 9457 section 3.1) with the members this library sends. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** Seconds, equal to `Retry-After`. */
  "retry-after"?: number;
  /** Names of the policies that denied (the draft's extension member). */
  "violated-policies"?: string[];
}

/**
 * The 429 body for a denial.
 * @param detail the `detail` text when the caller has it already (it is always the one built here)
 * @example tooManyRequests(18, ["100-per-1m"]) // { type: QUOTA_EXCEEDED, status: 429, "retry-after": 18, ... }
 */
export function tooManyRequests(retryAfterSeconds: number, violated: readonly string[], detail?: string): ProblemDetails {
  return {
    type: QUOTA_EXCEEDED,
    title: "Too Many Requests",
    status: 429,
    detail: detail ?? `Rate limit exceeded (${violated.join(", ")}); retry after ${retryAfterSeconds} s.`,
    "retry-after": retryAfterSeconds,
    "violated-policies": [...violated],
  };
}

/**
 * {@link tooManyRequests} for one policy, with its `detail` already built: the same object, without
 * the copy of a one-name list.
 */
export function tooManyRequestsFor(policy: string, retryAfterSeconds: number, detail: string): ProblemDetails {
  return {
    type: QUOTA_EXCEEDED,
    title: "Too Many Requests",
    status: 429,
    detail,
    "retry-after": retryAfterSeconds,
    "violated-policies": [policy],
  };
}

/**
 * The 429 body for a request refused because the client already has `limit` requests in flight
 * (option `concurrency`). A slot frees when one of them finishes, which no one can predict, so it
 * says to retry after 1 s.
 * @example tooManyInFlight(10)
 */
export function tooManyInFlight(limit: number): ProblemDetails {
  return {
    type: QUOTA_EXCEEDED,
    title: "Too Many Requests",
    status: 429,
    detail: `Too many requests in flight (at most ${limit} at once); retry after 1 s.`,
    "retry-after": 1,
    "violated-policies": [`${limit}-in-flight`],
  };
}

/**
 * The 403 body for a client on the deny list. RFC 9457 `about:blank`: the status says it all.
 * @example JSON.stringify(forbidden())
 */
export function forbidden(): ProblemDetails {
  return { type: "about:blank", title: "Forbidden", status: 403, detail: "This client is not allowed." };
}

/**
 * The 403 body for a request whose client address is unknown when the key needs it (`noAddress: "deny"`).
 * @example JSON.stringify(noClientAddress())
 */
export function noClientAddress(): ProblemDetails {
  return {
    type: "about:blank",
    title: "Forbidden",
    status: 403,
    detail: "The client's address is unknown, so this request cannot be rate limited.",
  };
}

/**
 * The 503 body when the store failed and the middleware was told to deny (`failure: "closed"`).
 * @example JSON.stringify(unavailable())
 */
export function unavailable(): ProblemDetails {
  return { type: "about:blank", title: "Service Unavailable", status: 503, detail: "The rate limiter is unavailable; try again later." };
}

/**
 * The 500 body when the app's own code failed on a request (a `key`, `cost` or `skip` function
 * threw, or gave a cost or key the limiter cannot take): no decision could be made, and the
 * request is not let through unlimited.
 * @example JSON.stringify(internalError())
 */
export function internalError(): ProblemDetails {
  return {
    type: "about:blank",
    title: "Internal Server Error",
    status: 500,
    detail: "The rate limit could not be decided for this request.",
  };
}

/**
 * The 429 body for a request that costs more than the policy ever admits at once: waiting will not
 * help, so it has no `retry-after` (and the response no `Retry-After`).
 * @example costTooHigh({ cost: 1000, maxCost: 100, policies: ["100-per-1m"] })
 */
export function costTooHigh(t: { cost: number; maxCost: number; policies: readonly string[] }): ProblemDetails {
  return {
    type: QUOTA_EXCEEDED,
    title: "Too Many Requests",
    status: 429,
    detail: `This request costs ${t.cost}, more than the policy ever admits at once (${t.maxCost}); it cannot be admitted.`,
    "violated-policies": [...t.policies],
  };
}
