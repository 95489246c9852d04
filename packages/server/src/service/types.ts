import type { DescriptorEntry } from "../config/match.js";
import { failureMessage, type FailedSource } from "./store-failure.js";

/**
 * One check: a domain and descriptors (Envoy's model), or a plain key and a named policy.
 * @example { domain: "api", descriptors: [[{ key: "user_id", value: "42" }]], cost: 1 }
 * @example { key: "user:42", policy: "login" }
 */
export interface CheckInput {
  /** Rules domain. With a plain key it defaults to the policy's name. */
  readonly domain?: string | undefined;
  /** Each descriptor is an ordered list of entries; every descriptor is decided (as Envoy does). */
  readonly descriptors?: readonly (readonly DescriptorEntry[])[] | undefined;
  /** A plain key, decided with the named policy `policy` from the rules file's `policies`. */
  readonly key?: string | undefined;
  readonly policy?: string | undefined;
  /** Cost units of this request, multiplied by the matched rule's `cost`. @default 1 */
  readonly cost?: number | undefined;
  /**
   * Per-descriptor limits sent by the caller instead of the rules (Envoy's
   * `RateLimitDescriptor.limit`, set in Envoy's route config), aligned with `descriptors`: as in
   * envoyproxy/ratelimit, such a descriptor skips rule matching, is never in shadow mode, and is
   * counted per clock-aligned unit (a fixed window).
   */
  readonly descriptorLimits?: ReadonlyArray<CallerLimit | undefined> | undefined;
  /**
   * Per-descriptor request costs, aligned with `descriptors` (Envoy's
   * `RateLimitDescriptor.hits_addend`): where given, it replaces `cost` for that descriptor, and
   * 0 decides without charging (check only), as in envoyproxy/ratelimit.
   */
  readonly descriptorCosts?: ReadonlyArray<number | undefined> | undefined;
  /**
   * What a cost larger than the policy could ever admit gets: a CheckError (the HTTP API's 400)
   * or a denial (`deny`, Envoy's RLS: OVER_LIMIT, as envoyproxy/ratelimit answers it). Nothing
   * is charged either way.
   * @default "error"
   */
  readonly oversizeCost?: "error" | "deny" | undefined;
}

/** A limit the caller sends with a descriptor: `requestsPerUnit` per `unitMs` (0: every request is over). */
export interface CallerLimit {
  readonly requestsPerUnit: number;
  readonly unitMs: number;
}

/** Which rule decided, and why. */
export interface Explain {
  /** Rule id (`api/remote_address/path=/search*`), `policy:<name>`, or null when nothing matched. */
  readonly rule: string | null;
  /** `rule`: the matched rule's policy; `override`: an override replaced it; `none`: nothing matched. */
  readonly source: "rule" | "override" | "policy" | "none";
  /** A sentence for people: the match path, the policy, and the outcome. */
  readonly why: string;
}

/** The outcome for one descriptor (or the plain key). Times in integer milliseconds. */
export interface DescriptorStatus {
  /** Canonical descriptor key (`user_id=42`, `remote_address=1.2.3.4|path=/api`) or the plain key. */
  readonly key: string;
  /** Whether this descriptor lets the request through (always true in shadow mode). */
  readonly allowed: boolean;
  /** Whether the limit itself denied (differs from `!allowed` only in shadow mode). */
  readonly overLimit: boolean;
  readonly shadow: boolean;
  readonly unlimited: boolean;
  /** The policy's limit; null when unlimited or unmatched. */
  readonly limit: number | null;
  readonly remaining: number | null;
  readonly retryAfterMs: number;
  readonly resetAfterMs: number;
  readonly delayMs: number;
  /** Window of the deciding limit; null when unlimited or unmatched. */
  readonly windowMs: number | null;
  /** Name of the deciding limit (`100-per-1m`); null when unlimited or unmatched. */
  readonly policy: string | null;
  /** Why it was denied or decided by a failure policy: the library's `reason`, or `blocked`. */
  readonly reason: string | null;
  readonly explain: Explain;
}

/** The answer to a {@link CheckInput}: allowed only when every descriptor allows. */
export interface CheckResult {
  readonly allowed: boolean;
  readonly domain: string;
  readonly statuses: readonly DescriptorStatus[];
}

/** A request the service cannot decide: transports turn it into 400 / INVALID_ARGUMENT. */
export class CheckError extends Error {
  override readonly name = "CheckError";
}

/**
 * What the service depends on failed: the rate-limit store (its decisions, resets, leases) or the
 * overrides database. Thrown where the service calls them, wrapping whatever they threw (`cause`),
 * so transports answer it 503 / UNAVAILABLE ("the store failed: ..."), and answer any other
 * unexpected error (a bug in the service) as what it is: 500 / INTERNAL. Its message, which
 * clients see, says what kind of failure it was and of which store, never the error's own text
 * (store-failure.ts); the log line that reports it has the error (`cause`) and {@link errorId}.
 */
export class StoreFailure extends Error {
  override readonly name = "StoreFailure";
  /**
   * A random id, in the message and in the log line with the error (`errorId`); shared by the
   * failures of the same kind for a while (error-id.ts).
   */
  readonly errorId: string;
  /**
   * @param source the store that failed (a limiter's store, or the overrides store), to name it
   */
  constructor(
    readonly what: "store" | "overrides database",
    cause: unknown,
    source?: FailedSource,
  ) {
    const { message, id } = failureMessage(what, cause, source);
    super(message, { cause });
    this.errorId = id;
  }
}

/** What the service reports, for metrics and the dashboard. Implemented in metrics.ts and dashboard/stats.ts; optional for tests and embedding. */
export interface DecisionObserver {
  /**
   * One decision. `key`, given with a denial (`over_limit`, `blocked`) only, is the denied state key
   * `<domain>|<descriptor key or plain key>` (descriptor-key.ts `stateKey`; for "top keys by denials"; no string is built otherwise).
   */
  decision(
    domain: string,
    rule: string,
    outcome: "ok" | "over_limit" | "shadow_over_limit" | "unlimited" | "no_match" | "replaced" | "blocked",
    key?: string,
  ): void;
  /**
   * A decision reported `ok` was given back: its check or batch was answered with an error, and
   * its charge refunded (service/charges.ts). It admitted nothing.
   */
  refunded?(domain: string, rule: string): void;
  /** A {@link limitHit} (the same arguments) whose charge was given back, as {@link refunded}. */
  limitRefunded?(stat: LimitStatKey, limit: number, usedBefore: number, cost: number): void;
  /** One store call took `seconds`. */
  storeLatency(seconds: number): void;
  /**
   * One more store call, not timed: count it as taking as long as the last one given to
   * `storeLatency`. With it, the service times only about one in-memory store call in 64
   * (service/store-call.ts); without it, every call is timed. Other stores: every call timed.
   */
  storeLatencyAgain?(): void;
  storeError(kind: "error" | "failure_policy"): void;
  /** A decision came with a reason (`limit`, `denial-cache`, `overloaded`, `degraded`, `store-error`, `insurance`). */
  decisionReason?(reason: string): void;
  /**
   * One descriptor charged `cost` units against a limit of `limit` of which `usedBefore` were
   * used: over the limit exactly when `usedBefore + cost > limit` (envoyproxy/ratelimit's
   * per-limit stats; not called for checks that charge nothing).
   */
  limitHit?(stat: LimitStatKey, limit: number, usedBefore: number, cost: number): void;
}

/**
 * What envoyproxy/ratelimit counts a limit's stats under: its stat key, `<domain>.<key>[_<value>]...`
 * (the rule's path in the rules, or with `detailed_metric` and a descriptor's own limit, the
 * request's entries), sanitised as its `SanitizeStatName`.
 */
export interface LimitStatKey {
  readonly key: string;
  readonly domain: string;
  /** The key carries the request's values (bounded by a cap in the metrics), not only the rules'. */
  readonly valued: boolean;
  /** The rule is in shadow mode. */
  readonly shadow: boolean;
}
