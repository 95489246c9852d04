import { ALGORITHM_IMPLS, type Algorithm, type LimitState } from "./algorithms/index.js";
import { newOutcome, type Decision, type LimitOutcome, type Outcome } from "./decision.js";
import type { ResolvedLimit } from "./options.js";

/**
 * Runs one decision over the states of every limit on a key: pure, no I/O.
 * Several limits are all-or-nothing: if one denies, none is charged. The decision reports the
 * most restrictive limit: when denied, the denying limit with the longest wait (so `retryAfterMs`
 * is when every limit admits the cost: counts never grow while nobody asks); when allowed,
 * the one with the fewest units left.
 */
export class Evaluator {
  readonly limits: readonly ResolvedLimit[];
  private readonly algs: readonly Algorithm[];
  private readonly outs: Outcome[];
  private readonly single: boolean;

  constructor(limits: readonly ResolvedLimit[]) {
    this.limits = limits;
    this.algs = limits.map((l) => ALGORITHM_IMPLS[l.algorithm]);
    this.outs = limits.map(() => newOutcome());
    this.single = limits.length === 1;
  }

  /** Fresh states for a key never seen. */
  init(): LimitState[] {
    return this.limits.map((l, i) => (this.algs[i] as Algorithm).init(l));
  }

  /** Resets `states` in place to fresh ones (for an expired entry), keeping their rings. */
  clear(states: LimitState[]): void {
    for (const s of states) {
      s.a = 0;
      s.b = 0;
      if (s.ring) s.ring.fill(0);
    }
  }

  /**
   * Decides `cost` at `nowMs`; when `commit` and allowed, charges every limit.
   * `this.ttlMs` is left holding how long the states matter after this call.
   */
  run(states: LimitState[], nowMs: number, cost: number, commit: boolean): Decision {
    if (this.single) {
      const lim = this.limits[0] as ResolvedLimit;
      const out = this.outs[0] as Outcome;
      const st = states[0] as LimitState;
      (this.algs[0] as Algorithm).check(st, nowMs, cost, lim, out);
      if (out.allowed && commit) (this.algs[0] as Algorithm).commit(st, nowMs, cost, lim);
      this.ttlMs = out.resetAfterMs;
      return {
        allowed: out.allowed,
        limit: lim.limit,
        remaining: out.remaining,
        retryAfterMs: out.retryAfterMs,
        resetAfterMs: out.resetAfterMs,
        delayMs: out.delayMs,
        reason: out.allowed ? undefined : "limit",
        policy: 0,
        policyName: lim.name,
        windowMs: lim.windowMs,
        limits: undefined,
      };
    }
    let allowed = true;
    for (let i = 0; i < this.limits.length; i++) {
      const out = this.outs[i] as Outcome;
      (this.algs[i] as Algorithm).check(states[i] as LimitState, nowMs, cost, this.limits[i] as ResolvedLimit, out);
      if (!out.allowed) allowed = false;
    }
    if (allowed && commit) {
      for (let i = 0; i < this.limits.length; i++) {
        (this.algs[i] as Algorithm).commit(states[i] as LimitState, nowMs, cost, this.limits[i] as ResolvedLimit);
      }
    }
    return this.combine(allowed);
  }

  /** How long the states of the last `run` matter (ms): after it they equal fresh states. */
  ttlMs = 0;

  /**
   * Builds the decision from outcomes already written into the scratch space (by `run`, or by a
   * store that computed them elsewhere, such as a Lua script): see {@link Evaluator.outcomes}.
   */
  combine(allowed: boolean): Decision {
    const n = this.limits.length;
    const limits = new Array<LimitOutcome>(n);
    let pick = -1;
    let ttl = 0;
    let delay = 0;
    for (let i = 0; i < n; i++) {
      const o = this.outs[i] as Outcome;
      const l = this.limits[i] as ResolvedLimit;
      limits[i] = {
        name: l.name,
        allowed: o.allowed,
        limit: l.limit,
        remaining: allowed ? o.remaining : Math.min(o.remaining, l.capacity),
        retryAfterMs: o.retryAfterMs,
        resetAfterMs: o.resetAfterMs,
        windowMs: l.windowMs,
      };
      if (o.resetAfterMs > ttl) ttl = o.resetAfterMs;
      if (o.delayMs > delay) delay = o.delayMs;
      if (pick < 0) pick = i;
      else {
        const p = this.outs[pick] as Outcome;
        if (allowed ? o.remaining < p.remaining : !o.allowed && (p.allowed || o.retryAfterMs > p.retryAfterMs)) pick = i;
      }
    }
    this.ttlMs = ttl;
    const o = this.outs[pick] as Outcome;
    const l = this.limits[pick] as ResolvedLimit;
    return {
      allowed,
      limit: l.limit,
      remaining: o.remaining,
      retryAfterMs: allowed ? 0 : o.retryAfterMs,
      resetAfterMs: ttl,
      delayMs: allowed ? delay : 0,
      reason: allowed ? undefined : "limit",
      policy: pick,
      policyName: l.name,
      windowMs: l.windowMs,
      limits,
    };
  }

  /** The scratch outcomes, one per limit, for stores that compute them elsewhere. */
  get outcomes(): readonly Outcome[] {
    return this.outs;
  }

  /** Gives back `cost` units on every limit. */
  refund(states: LimitState[], nowMs: number, cost: number): void {
    for (let i = 0; i < this.limits.length; i++) {
      (this.algs[i] as Algorithm).refund(states[i] as LimitState, nowMs, cost, this.limits[i] as ResolvedLimit);
    }
  }
}
