import { RateLimiter, resolveLimits, type LimitSpec, type Store } from "ratekeeper";
import type { CompiledPolicy, Rules } from "../config/rules.js";
import type { Override } from "../overrides/types.js";
import { MAX_CALLER_LIMITS } from "./request-caps.js";
import { CheckError, type CallerLimit } from "./types.js";

/**
 * Limiters of override policies kept by their limits' JSON beyond the overrides that use them
 * (~2 KB each with their memory store table): overrides come and go for the life of the service,
 * so past this many the oldest is let go. A live override still reaches its limiter through its
 * policy object, and one made again finds its counts in the store.
 */
export const MAX_OVERRIDE_LIMITERS = 4096;

/**
 * Which {@link RateLimiter} decides a policy: one per distinct policy, created on first use and
 * kept across rule reloads, so an unchanged policy keeps its state (its namespace is its policy
 * id) and rules with the same policy share one limiter (their keys differ).
 */
export class LimiterCache {
  /** policy id -> limiter. */
  private readonly byPolicy = new Map<string, RateLimiter>();
  /** `caller:<requests_per_unit>:<unit_ms>` -> the policy of a limit sent with a descriptor. */
  private readonly callerPolicies = new Map<string, CompiledPolicy>();
  /** JSON of an override's limits -> limiter (or the error its policy raised); oldest first, at most {@link MAX_OVERRIDE_LIMITERS}. */
  private readonly byOverrideJson = new Map<string, RateLimiter | Error>();
  /**
   * Override policy object -> limiter: the overrides cache shares one frozen policy object per
   * distinct policy, so the hot path skips building the JSON key (about 1 µs a check).
   */
  private readonly byOverridePolicy = new WeakMap<object, RateLimiter | Error>();

  /** @param clock injected into every limiter when given (tests); otherwise stores keep their own time */
  constructor(
    private readonly store: Store,
    private readonly clock: (() => number) | undefined,
  ) {}

  /** The limiter for a policy id, created once. */
  forPolicy(id: string, specs: readonly LimitSpec[]): RateLimiter {
    let l = this.byPolicy.get(id);
    if (l === undefined) {
      l = this.create(specs);
      this.byPolicy.set(id, l);
    }
    return l;
  }

  /**
   * Lets go of the limiters of policies not in `rules` (those in force after a reload), so a
   * service reloaded many times holds the limiters of its rules, not of every policy it ever had.
   * Nothing is lost: a limiter keeps no state of its own (its counts are in the store, under its
   * policy id), so one made again for a policy that comes back finds them.
   */
  retain(rules: Rules): void {
    const ids = new Set<string>();
    for (const r of rules.rules) ids.add(r.policyId);
    for (const p of rules.policies.values()) ids.add(p.policyId);
    for (const id of this.byPolicy.keys()) if (!ids.has(id)) this.byPolicy.delete(id);
  }

  /** The limiter of an override's own policy, or the error its policy raises (reported per check). */
  forOverride(o: Override): RateLimiter | Error {
    const policy = o.policy as { readonly limits: readonly LimitSpec[] };
    const known = this.byOverridePolicy.get(policy);
    if (known !== undefined) return known;
    const id = JSON.stringify(policy.limits);
    let l = this.byOverrideJson.get(id);
    if (l === undefined) {
      try {
        l = this.create(policy.limits);
      } catch (e) {
        l = e as Error;
      }
      if (this.byOverrideJson.size >= MAX_OVERRIDE_LIMITERS) this.byOverrideJson.delete(this.byOverrideJson.keys().next().value as string);
      this.byOverrideJson.set(id, l);
    }
    this.byOverridePolicy.set(policy, l);
    return l;
  }

  /**
   * The policy of a limit Envoy sends with a descriptor. As in envoyproxy/ratelimit, such a
   * descriptor skips rule matching, is never in shadow mode, is counted per clock-aligned unit (a
   * fixed window), and 0 requests per unit puts every request over the limit. Its id derives from
   * the limit, so a changed limit starts afresh.
   * @throws CheckError for a limit that is negative or not whole, or a new one past {@link MAX_CALLER_LIMITS}
   */
  callerPolicy({ requestsPerUnit: rpu, unitMs }: CallerLimit): CompiledPolicy {
    if (!Number.isSafeInteger(rpu) || rpu < 0 || !Number.isSafeInteger(unitMs) || unitMs <= 0) {
      throw new CheckError(`descriptor limit: requests_per_unit must be 0 or more and the unit positive (got ${rpu} per ${unitMs} ms)`);
    }
    const id = `caller:${rpu}:${unitMs}`;
    let p = this.callerPolicies.get(id);
    if (p === undefined) {
      if (this.callerPolicies.size >= MAX_CALLER_LIMITS) {
        throw new CheckError(
          `limit.requests_per_unit: more than ${MAX_CALLER_LIMITS} distinct limits sent with descriptors since the service started (each holds a limiter for the process's life); send the limits your proxy's config names, or put them in the rules file`,
        );
      }
      const name = `${rpu}-per-${unitMs}ms`;
      if (rpu === 0) p = { specs: [], limits: [], policyId: id, cost: 1, shadow: false, denyAll: { windowMs: unitMs, name }, rlsName: "" };
      else {
        const specs: LimitSpec[] = [{ algorithm: "fixed-window", limit: rpu, window: unitMs, name }];
        p = { specs, limits: resolveLimits(specs), policyId: id, cost: 1, shadow: false, rlsName: "" };
      }
      this.callerPolicies.set(id, p);
    }
    return p;
  }

  private create(specs: readonly LimitSpec[]): RateLimiter {
    return new RateLimiter({ limits: specs as LimitSpec[], store: this.store, ...(this.clock ? { clock: this.clock } : {}) });
  }
}
