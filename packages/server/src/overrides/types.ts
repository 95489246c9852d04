import type { LimitSpec } from "ratekeeper";

/**
 * A per-key override (seed 004's configuration store: "user:241531" may make 5 requests a second
 * while everyone else gets the rule's default). It replaces the policy of the rule that matched.
 * - `limits`: a policy of its own (any algorithm and options, the library's own spec objects);
 * - `"unlimited"`: never limited (a temporary boost without bound);
 * - `"blocked"`: always denied (a temporary block).
 */
export interface Override {
  /** Rule domain (Envoy-style) the override applies in. */
  readonly domain: string;
  /**
   * The descriptor key it applies to, in the canonical form the service builds from a
   * descriptor's entries (see service/descriptor-key.ts), e.g. `user_id=241531`, or a plain key
   * sent to `POST /v1/check`.
   */
  readonly key: string;
  readonly policy: { readonly limits: readonly LimitSpec[] } | "unlimited" | "blocked";
  /** Optional expiry, ms since the epoch: after it the override is ignored and dropped. */
  readonly expiresAtMs?: number | undefined;
  /** Free text: who set it and why. */
  readonly note?: string | undefined;
}

/**
 * What the decision service's hot path asks, synchronously, on every check. Implementations
 * answer from an in-memory cache (the database is never on the hot path).
 */
export interface OverrideLookup {
  /** The live (not expired at `nowMs`) override for `domain` and `key`, if any. */
  get(domain: string, key: string, nowMs: number): Override | undefined;
}
