import type { Decision, LimitSpec, RateLimiter, Store } from "ratekeeper";
import { matchDescriptor, type DescriptorEntry } from "../config/match.js";
import type { Rules } from "../config/rules.js";
import { Check, namedPolicy, type Application } from "./check.js";
import { adjusted, descriptorCost, requestCost } from "./costs.js";
import { LimiterCache } from "./limiters.js";
import { applyOverride, UsableOverrides, type OverrideDeps } from "./override.js";
import { FaultLog, type ServiceLog } from "./config-faults.js";
import { allOrRefund, refund, type Charge, type RefundReport } from "./charges.js";
import { checkDomain, checkPlainKey } from "./request-caps.js";
import { resetKey, StoreTimer } from "./store-call.js";
import type { OverrideLookup } from "../overrides/types.js";
import { boundedKey, descriptorKey, stateKey } from "./descriptor-key.js";
import { DecisionExplain, matchedText } from "./explain.js";
import { ruleStatKey, usedBefore, valuedStatKey } from "./limit-stats.js";
import { isReplaced, replacedNames } from "./replaces.js";
import { decidedStatus, deniedAll, overallAllowed, single, unlimitedStatus, withRlsName } from "./status.js";
import { CheckError, type CallerLimit, type CheckInput, type CheckResult, type DecisionObserver, type DescriptorStatus } from "./types.js";

/** Options of {@link DecisionService}. */
export interface DecisionServiceOptions {
  /** Where limit state lives: a `MemoryStore` or a `RedisStore` shared by every instance. */
  store: Store;
  rules: Rules;
  /** Per-key overrides (the configuration store); asked synchronously on every check. */
  overrides?: OverrideLookup | undefined;
  /** Milliseconds since the epoch, for override expiry (and the limiters, when injected). @default Date.now */
  clock?: (() => number) | undefined;
  /** Pass the clock to the limiters too (tests); otherwise stores keep their own time (Redis `TIME`). @default false */
  injectClock?: boolean | undefined;
  observer?: DecisionObserver | undefined;
  /** Where faults of the operator's configuration met while deciding are logged, once each (service/config-faults.ts). */
  logger?: ServiceLog | undefined;
}

/**
 * Decides rate limits with no transport: the rules, one cached {@link RateLimiter} per policy
 * (rules with the same policy share it: their keys differ, since a key is the domain plus the
 * descriptor), overrides, shadow mode and explain. HTTP and gRPC are thin layers over it.
 *
 * State key of a descriptor: `<domain>|<canonical descriptor key>`; of a plain key:
 * `<domain>|<key>` (a domain holding `|`, or empty, is quoted: descriptor-key.ts `stateKey`). The RateLimiter's namespace is its policy id, so two instances with the same
 * rules share state in Redis, and a changed policy starts afresh.
 * @example
 * const svc = new DecisionService({ store: new MemoryStore(), rules: loadRulesFile("rules.yaml") });
 * const r = await svc.decide({ domain: "api", descriptors: [[{ key: "user_id", value: "42" }]] });
 */
export class DecisionService {
  private rulesNow: Rules;
  readonly store: Store;
  /** The overrides it applies: those of `options.overrides` whose policy the library takes (service/override.ts). */
  readonly overrides: OverrideLookup | undefined;
  private readonly clock: () => number;
  private readonly injectClock: boolean;
  /**
   * The clock the limiters decide on: the service's when `injectClock`, else undefined (the
   * store's own time). Limit headers that show an absolute time add their durations to it.
   */
  readonly limiterClock: (() => number) | undefined;
  private readonly observer: DecisionObserver | undefined;
  /** Which RateLimiter decides each policy, each override and each caller-sent limit. */
  private readonly limiters: LimiterCache;
  /** Each store call, reported to the observer (store-call.ts). */
  private readonly timer: StoreTimer;
  /** What overrides are decided with (service/override.ts). */
  private readonly overrideDeps: OverrideDeps;
  /** Where refunds are reported (service/charges.ts). */
  private readonly refunds: RefundReport;

  constructor(options: DecisionServiceOptions) {
    this.store = options.store;
    this.rulesNow = options.rules;
    this.clock = options.clock ?? Date.now;
    this.injectClock = options.injectClock === true;
    this.observer = options.observer;
    this.limiterClock = this.injectClock ? this.clock : undefined;
    this.limiters = new LimiterCache(this.store, this.limiterClock);
    this.timer = new StoreTimer(this.observer, this.store);
    this.refunds = { log: options.logger, observer: this.observer };
    const faults = new FaultLog(options.logger);
    this.overrides = options.overrides && new UsableOverrides(options.overrides, this.limiters, faults);
    this.overrideDeps = { limiters: this.limiters, observer: this.observer, timer: this.timer, faults };
  }

  /** The rules in force. */
  get rules(): Rules {
    return this.rulesNow;
  }

  /** Puts new rules in force (hot reload): unchanged policies keep their state; gone ones' limiters are let go. */
  setRules(rules: Rules): void {
    this.rulesNow = rules;
    this.limiters.retain(rules);
  }

  /** The limiter for a policy, created once (kept across reloads). */
  limiterFor(id: string, specs: readonly LimitSpec[]): RateLimiter {
    return this.limiters.forPolicy(id, specs);
  }

  /**
   * Decides every descriptor of a check (or its plain key), charging each that is admitted.
   * Like Envoy's ratelimit service, descriptors are charged independently: the request is
   * allowed only when all allow, but one descriptor's denial does not undo another's charge.
   * A check answered with an error (a rejection) keeps no charge: what its other descriptors
   * charged is given back first (service/charges.ts).
   * @param charges where to add what the check charged (a batch's, to give back if the batch fails)
   * @throws CheckError (as a rejected promise) for a request that cannot be decided (unknown policy, bad cost, bad key)
   */
  decide(input: CheckInput, charges?: Charge[]): Promise<CheckResult> {
    try {
      const r = this.decideNow(input, charges);
      return r instanceof Promise ? r : Promise.resolve(r);
    } catch (e) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the thrown value, as an async function would reject with
      return Promise.reject(e);
    }
  }

  /**
   * {@link DecisionService.decide}, answering synchronously when it can: a store that decides
   * synchronously (the memory store) and no override with its own policy or several descriptors
   * to wait for. The transports' hot paths use it: each `async` layer between the request and the
   * store cost a promise and a microtask turn per check (five of them were about 0.5 us of a
   * `GET /v1/auth`, docs/benchmarks/service.md).
   * @throws CheckError synchronously (or as a rejected promise) as {@link decide}
   */
  decideNow(input: CheckInput, charges?: Charge[]): CheckResult | Promise<CheckResult> {
    const check = this.newCheck(input, false, charges);
    if (input.key !== undefined) return this.decidePlain(check, input);
    const domain = input.domain;
    if (typeof domain !== "string" || domain.length === 0) throw new CheckError("domain: must be a non-empty string");
    const descriptors = input.descriptors;
    if (!descriptors || descriptors.length === 0)
      throw new CheckError("descriptors: must be a non-empty list (or give a key and a policy)");
    if (descriptors.length === 1) {
      const cost = descriptorCost(input.descriptorCosts?.[0], check.cost, 0);
      const s = this.decideOne(check, domain, descriptors[0] as readonly DescriptorEntry[], input.descriptorLimits?.[0], cost);
      return s instanceof Promise ? s.then((x) => single(domain, x)) : single(domain, s);
    }
    // Every descriptor is decided even when one of them cannot be (a CheckError): as they were
    // when each was an async call of its own. Then, if one failed, the others' charges are given back.
    const costs = input.descriptorCosts;
    const mine: Charge[] = [];
    const all = check.derive(replacedNames(check.rules, domain, descriptors, input.descriptorLimits), mine);
    const each = descriptors.map(async (d, i) =>
      this.decideOne(all, domain, d, input.descriptorLimits?.[i], descriptorCost(costs?.[i], check.cost, i)),
    );
    return allOrRefund(each, mine, charges, this.refunds).then((statuses) => ({ allowed: overallAllowed(statuses), domain, statuses }));
  }

  /**
   * The decision a request of cost 1 would get now, changing nothing (`GET /v1/keys/...`).
   * @throws CheckError as {@link decide}
   */
  async peek(input: CheckInput): Promise<CheckResult> {
    const check = this.newCheck(input, true);
    if (input.key !== undefined) return await this.decidePlain(check, input);
    const domain = input.domain ?? "";
    const descriptors = input.descriptors ?? [];
    const all = check.derive(replacedNames(check.rules, domain, descriptors, input.descriptorLimits), undefined);
    const statuses = await Promise.all(
      descriptors.map(async (d, i) => this.decideOne(all, domain, d, input.descriptorLimits?.[i], check.cost)),
    );
    return { allowed: overallAllowed(statuses), domain, statuses };
  }

  /**
   * Forgets a descriptor's (or plain key's) state under the policy that applies to it now
   * (the override's, if one is in force). For the admin API.
   * @returns the state keys reset
   */
  async reset(input: CheckInput): Promise<string[]> {
    const rules = this.rulesNow;
    const nowMs = this.clock();
    const done: string[] = [];
    if (input.key !== undefined) {
      const np = namedPolicy(rules, input.policy);
      const domain = input.domain ?? np.name;
      const limiter = this.overrideLimiter(domain, input.key, nowMs) ?? this.limiterFor(np.policyId, np.specs);
      const state = stateKey(domain, input.key);
      await resetKey(limiter, state);
      done.push(state);
      return done;
    }
    const domain = input.domain ?? "";
    for (const entries of input.descriptors ?? []) {
      const key = boundedKey(descriptorKey(entries));
      const m = matchDescriptor(rules, domain, entries);
      const limiter =
        this.overrideLimiter(domain, key, nowMs) ??
        (m.rule && !m.rule.unlimited ? this.limiterFor(m.rule.policyId, m.rule.specs) : undefined);
      if (limiter) {
        const state = stateKey(domain, key);
        await resetKey(limiter, state);
        done.push(state);
      }
    }
    return done;
  }

  /** Gives back what checks answered with an error (`cause`) had charged; a refund that fails is logged. */
  refund(charges: readonly Charge[], cause: unknown): Promise<void> {
    return refund(charges, cause, this.refunds);
  }

  private newCheck(input: CheckInput, peek: boolean, charges?: Charge[]): Check {
    const cost = requestCost(input.cost);
    return new Check({ rules: this.rulesNow, clock: this.clock, cost, peek, oversizeDeny: input.oversizeCost === "deny", charges });
  }

  private overrideLimiter(domain: string, key: string, nowMs: number): RateLimiter | undefined {
    const o = this.overrides?.get(domain, key, nowMs);
    if (o === undefined || typeof o.policy === "string") return undefined;
    const l = this.limiters.forOverride(o);
    return l instanceof Error ? undefined : l;
  }

  /** A plain key under a named policy. */
  private decidePlain(check: Check, input: CheckInput): CheckResult | Promise<CheckResult> {
    const key = checkPlainKey(input.key);
    const np = namedPolicy(check.rules, input.policy);
    const domain = checkDomain(input.domain ?? np.name);
    // Metrics label plain-key checks "(policy)": their domain is whatever the client sent.
    const status = this.apply({
      check,
      label: "(policy)",
      domain,
      key,
      ruleId: `policy:${np.name}`,
      policy: np,
      matched: `policy ${np.name}`,
      cost: check.cost,
    });
    return status instanceof Promise ? status.then((x) => single(domain, x)) : single(domain, status);
  }

  /**
   * One descriptor: its caller-sent limit, or the rule it matches, or an override, or nothing.
   * Synchronous unless the store or an override's limiter answers with a promise.
   */
  private decideOne(
    check: Check,
    domain: string,
    entries: readonly DescriptorEntry[],
    callerLimit: CallerLimit | undefined,
    cost: number,
  ): DescriptorStatus | Promise<DescriptorStatus> {
    if (!Array.isArray(entries) || entries.length === 0) throw new CheckError("descriptors: each descriptor needs at least one entry");
    // Matched on the entries as sent; counted under a key of bounded length.
    let key = boundedKey(descriptorKey(entries));
    // A caller's limit applies only in a domain the rules have, as envoyproxy/ratelimit's GetLimit
    // looks the domain up first: elsewhere the descriptor is matched (and limits nothing).
    if (callerLimit !== undefined && check.rules.domains.has(domain)) {
      const matched = "the limit sent with the descriptor (Envoy route config)";
      const policy = this.limiters.callerPolicy(callerLimit);
      // Its stat key carries the request's values.
      const stat = this.observer?.limitHit ? valuedStatKey(domain, entries) : undefined;
      return this.apply({ check, label: domain, domain, key, ruleId: `${domain}/(descriptor limit)`, policy, matched, cost, stat });
    }
    const rules = check.rules;
    const m = matchDescriptor(rules, domain, entries);
    // share_threshold: every value matching the wildcard is counted under the pattern.
    if (m.shared) key = boundedKey(descriptorKey(m.shared));
    const rule = m.rule;
    if (rule === undefined) {
      // Label cardinality stays bounded by the rules: a domain no rule names is "(unknown)".
      const label = rules.domains.has(domain) ? domain : "(unknown)";
      // An override can still apply (e.g. block one address that no rule names).
      const o = this.overrides?.get(domain, key, check.nowMs);
      const context = `no rule matched (${m.miss ?? ""})`;
      if (o !== undefined) return applyOverride(this.overrideDeps, o, { check, label, domain, key, ruleId: undefined, cost, context });
      this.observer?.decision(label, "", "no_match");
      return unlimitedStatus(key, { rule: null, source: "none", why: `not limited: ${m.miss ?? "no rule matched"}` }, false);
    }
    // Replaced by another descriptor of the request: as if no rule matched (an override still applies).
    if (isReplaced(rule, check.replaced)) {
      const o = this.overrides?.get(domain, key, check.nowMs);
      const why = `rule ${rule.id} (name ${rule.rlsName ?? ""}) is replaced by another descriptor of this request`;
      if (o !== undefined)
        return applyOverride(this.overrideDeps, o, { check, label: domain, domain, key, ruleId: rule.id, cost, context: why });
      this.observer?.decision(domain, rule.id, "replaced");
      return unlimitedStatus(key, { rule: null, source: "none", why: `not limited: ${why}` }, false);
    }
    if (rule.unlimited) {
      const o = this.overrides?.get(domain, key, check.nowMs);
      const context = `rule ${rule.id} is unlimited`;
      if (o !== undefined)
        return applyOverride(this.overrideDeps, o, {
          check,
          label: domain,
          domain,
          key,
          ruleId: rule.id,
          cost,
          ruleCost: rule.cost,
          context,
        });
      this.observer?.decision(domain, rule.id, "unlimited");
      return unlimitedStatus(key, { rule: rule.id, source: "rule", why: `matched ${m.via.join(" > ")}: unlimited` }, rule.shadow);
    }
    const stat = this.observer?.limitHit
      ? ruleStatKey(rule, m.via, m.shared ?? entries, m.valueToMetric, m.shared !== undefined)
      : undefined;
    return this.apply({ check, label: domain, domain, key, ruleId: rule.id, policy: rule, matched: m.via, cost, stat });
  }

  /** Decides one descriptor under a policy (or the override in force for its key). */
  private apply(a: Application): DescriptorStatus | Promise<DescriptorStatus> {
    const { check, policy } = a;
    // Check only (cost 0): ask what a request of the rule's own cost would get, charging nothing.
    const checkOnly = a.cost === 0;
    const cost = policy.cost * (checkOnly ? 1 : a.cost);
    const o = this.overrides?.get(a.domain, a.key, check.nowMs);
    if (o !== undefined)
      return applyOverride(this.overrideDeps, o, { ...a, ruleCost: policy.cost, context: `${matchedText(a.matched)}, policy replaced` });
    const state = stateKey(a.domain, a.key);
    const peek = check.peek || checkOnly;
    if (policy.denyAll !== undefined) return deniedAll(this.observer, a, policy.denyAll, state, peek);
    const limiter = this.limiters.forPolicy(policy.policyId, policy.specs);
    // Too large to ever be admitted: a denial charging nothing (Envoy's RLS), or the caller's error.
    const oversize = cost > limiter.maxCost;
    if (oversize && !check.oversizeDeny)
      throw new CheckError(`cost: ${cost} is more than rule ${a.ruleId} could ever admit (at most ${limiter.maxCost})`);
    const d = this.timer.run(limiter, state, oversize ? policy.cost : cost, peek || oversize);
    const kind = oversize ? "oversize" : checkOnly ? "check-only" : "charged";
    const done = (x: Decision) => {
      const d = adjusted(x, kind, cost);
      if (kind === "charged" && check.recording) {
        // With the stats hit `decided` counts for it (not peek: charged), to take back on a refund.
        const hit = a.stat === undefined ? undefined : { stat: a.stat, limit: d.limit, usedBefore: usedBefore(d, cost) };
        check.charged(x, { limiter, state, cost, label: a.label, rule: a.ruleId, hit });
      }
      return this.decided(a, limiter, state, cost, d, peek);
    };
    return d instanceof Promise ? d.then(done) : done(d);
  }

  /** The status of a descriptor decided under its policy's limiter (`apply`'s second half). */
  private decided(a: Application, limiter: RateLimiter, state: string, cost: number, d: Decision, peek: boolean): DescriptorStatus {
    const shadow = a.policy.shadow;
    if (!peek) {
      const outcome = d.allowed ? "ok" : shadow ? "shadow_over_limit" : "over_limit";
      this.observer?.decision(a.label, a.ruleId, outcome, d.allowed || shadow ? undefined : state);
      if (a.stat !== undefined) this.observer?.limitHit?.(a.stat, d.limit, usedBefore(d, cost), cost);
    }
    const explain = new DecisionExplain(a.policy, a.ruleId, a.matched, limiter.limits, d, cost, shadow);
    return withRlsName(decidedStatus(a.key, d, d.allowed || shadow, shadow, explain, limiter.limits, cost), a.policy);
  }
}
