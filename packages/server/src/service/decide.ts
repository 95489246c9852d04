import { RateLimiter, type Decision, type LimitSpec, type ResolvedLimit, type Store } from "ratekeeper";
import { matchDescriptor, type DescriptorEntry } from "../config/match.js";
import type { Rule, Rules } from "../config/schema.js";
import type { Override, OverrideLookup } from "../overrides/types.js";
import { descriptorKey } from "./descriptor-key.js";

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
}

/** A limit the caller sends with a descriptor: `requestsPerUnit` per `unitMs`. */
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

/** What the service reports, for metrics and the dashboard. Implemented in metrics.ts and dashboard/stats.ts; optional for tests and embedding. */
export interface DecisionObserver {
  /**
   * One decision. `key`, given with a denial (`over_limit`, `blocked`) only, is the denied state key
   * `<domain>|<descriptor key or plain key>` (for "top keys by denials"; no string is built otherwise).
   */
  decision(
    domain: string,
    rule: string,
    outcome: "ok" | "over_limit" | "shadow_over_limit" | "unlimited" | "no_match" | "blocked",
    key?: string,
  ): void;
  storeLatency(seconds: number): void;
  storeError(kind: "error" | "failure_policy"): void;
}

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
}

const MAX_COST = 1_000_000_000;

/**
 * Decides rate limits with no transport: the rules, one cached {@link RateLimiter} per policy
 * (rules with the same policy share it: their keys differ, since a key is the domain plus the
 * descriptor), overrides, shadow mode and explain. HTTP and gRPC are thin layers over it.
 *
 * State key of a descriptor: `<domain>|<canonical descriptor key>`; of a plain key:
 * `<domain>|<key>`. The RateLimiter's namespace is its policy id, so two instances with the same
 * rules share state in Redis, and a changed policy starts afresh.
 * @example
 * const svc = new DecisionService({ store: new MemoryStore(), rules: loadRulesFile("rules.yaml") });
 * const r = await svc.decide({ domain: "api", descriptors: [[{ key: "user_id", value: "42" }]] });
 */
export class DecisionService {
  private rulesNow: Rules;
  readonly store: Store;
  overrides: OverrideLookup | undefined;
  private readonly clock: () => number;
  private readonly injectClock: boolean;
  private readonly observer: DecisionObserver | undefined;
  /** policy id -> limiter; kept across reloads so an unchanged policy keeps its state. */
  private readonly limiters = new Map<string, RateLimiter>();
  /** JSON of an override's limits -> limiter (or the error its policy raised). */
  private readonly overrideLimiters = new Map<string, RateLimiter | Error>();
  /**
   * Override policy object -> limiter: the overrides cache shares one frozen policy object per
   * distinct policy, so the hot path skips building the JSON key (about 1 µs a check).
   */
  private readonly overrideLimitersByPolicy = new WeakMap<object, RateLimiter | Error>();

  constructor(options: DecisionServiceOptions) {
    this.store = options.store;
    this.rulesNow = options.rules;
    this.overrides = options.overrides;
    this.clock = options.clock ?? Date.now;
    this.injectClock = options.injectClock === true;
    this.observer = options.observer;
  }

  /** The rules in force. */
  get rules(): Rules {
    return this.rulesNow;
  }

  /** Puts new rules in force (hot reload). Limiters of unchanged policies keep their state. */
  setRules(rules: Rules): void {
    this.rulesNow = rules;
  }

  /** The limiter for a policy, created once. */
  limiterFor(id: string, specs: readonly LimitSpec[]): RateLimiter {
    let l = this.limiters.get(id);
    if (l === undefined) {
      l = new RateLimiter({ limits: specs as LimitSpec[], store: this.store, ...(this.injectClock ? { clock: this.clock } : {}) });
      this.limiters.set(id, l);
    }
    return l;
  }

  /**
   * Decides every descriptor of a check (or its plain key), charging each that is admitted.
   * Like Envoy's ratelimit service, descriptors are charged independently: the request is
   * allowed only when all allow, but one descriptor's denial does not undo another's charge.
   * @throws CheckError for a request that cannot be decided (unknown policy, bad cost, bad key)
   */
  async decide(input: CheckInput): Promise<CheckResult> {
    const mult = checkCost(input.cost);
    const rules = this.rulesNow;
    const nowMs = this.clock();
    if (input.key !== undefined) {
      const { domain, status } = await this.decidePlain(rules, input, mult, nowMs, false);
      return { allowed: status.allowed, domain, statuses: [status] };
    }
    const domain = input.domain;
    if (typeof domain !== "string" || domain.length === 0) throw new CheckError("domain: must be a non-empty string");
    const descriptors = input.descriptors;
    if (!descriptors || descriptors.length === 0)
      throw new CheckError("descriptors: must be a non-empty list (or give a key and a policy)");
    if (descriptors.length === 1) {
      const s = await this.decideOne(
        rules,
        domain,
        descriptors[0] as readonly DescriptorEntry[],
        mult,
        nowMs,
        false,
        input.descriptorLimits?.[0],
      );
      return { allowed: s.allowed, domain, statuses: [s] };
    }
    const statuses = await Promise.all(
      descriptors.map((d, i) => this.decideOne(rules, domain, d, mult, nowMs, false, input.descriptorLimits?.[i])),
    );
    let allowed = true;
    for (const s of statuses) if (!s.allowed) allowed = false;
    return { allowed, domain, statuses };
  }

  /**
   * The decision a request of cost 1 would get now, changing nothing (`GET /v1/keys/...`).
   * @throws CheckError as {@link decide}
   */
  async peek(input: CheckInput): Promise<CheckResult> {
    const nowMs = this.clock();
    const rules = this.rulesNow;
    const mult = checkCost(input.cost);
    if (input.key !== undefined) {
      const { domain, status } = await this.decidePlain(rules, input, mult, nowMs, true);
      return { allowed: status.allowed, domain, statuses: [status] };
    }
    const domain = input.domain ?? "";
    const statuses = await Promise.all(
      (input.descriptors ?? []).map((d, i) => this.decideOne(rules, domain, d, mult, nowMs, true, input.descriptorLimits?.[i])),
    );
    return { allowed: statuses.every((s) => s.allowed), domain, statuses };
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
      const np = this.namedPolicy(rules, input.policy);
      const domain = input.domain ?? np.name;
      const limiter = this.overrideLimiter(domain, input.key, nowMs) ?? this.limiterFor(np.policyId, np.specs);
      const stateKey = `${domain}|${input.key}`;
      await limiter.reset(stateKey);
      done.push(stateKey);
      return done;
    }
    const domain = input.domain ?? "";
    for (const entries of input.descriptors ?? []) {
      const key = descriptorKey(entries);
      const m = matchDescriptor(rules, domain, entries);
      const limiter =
        this.overrideLimiter(domain, key, nowMs) ??
        (m.rule && !m.rule.unlimited ? this.limiterFor(m.rule.policyId, m.rule.specs) : undefined);
      if (limiter) {
        await limiter.reset(`${domain}|${key}`);
        done.push(`${domain}|${key}`);
      }
    }
    return done;
  }

  private overrideLimiter(domain: string, key: string, nowMs: number): RateLimiter | undefined {
    const o = this.overrides?.get(domain, key, nowMs);
    if (o === undefined || typeof o.policy === "string") return undefined;
    const l = this.overrideLimiterFor(o);
    return l instanceof Error ? undefined : l;
  }

  private overrideLimiterFor(o: Override): RateLimiter | Error {
    const policy = o.policy as { readonly limits: readonly LimitSpec[] };
    const known = this.overrideLimitersByPolicy.get(policy);
    if (known !== undefined) return known;
    const id = JSON.stringify(policy.limits);
    let l = this.overrideLimiters.get(id);
    if (l === undefined) {
      try {
        l = new RateLimiter({
          limits: policy.limits as LimitSpec[],
          store: this.store,
          ...(this.injectClock ? { clock: this.clock } : {}),
        });
      } catch (e) {
        l = e as Error;
      }
      this.overrideLimiters.set(id, l);
    }
    this.overrideLimitersByPolicy.set(policy, l);
    return l;
  }

  private namedPolicy(rules: Rules, name: string | undefined) {
    if (typeof name !== "string") throw new CheckError("policy: a plain key needs the name of a policy from the rules file's policies");
    const np = rules.policies.get(name);
    if (np === undefined) {
      const known = [...rules.policies.keys()];
      throw new CheckError(`policy: no policy named ${JSON.stringify(name)} (known: ${known.length ? known.join(", ") : "none"})`);
    }
    return np;
  }

  private async decidePlain(
    rules: Rules,
    input: CheckInput,
    mult: number,
    nowMs: number,
    peek: boolean,
  ): Promise<{ domain: string; status: DescriptorStatus }> {
    const key = input.key;
    if (typeof key !== "string" || key.length === 0 || key.length > 512) throw new CheckError("key: must be a string of 1-512 characters");
    const np = this.namedPolicy(rules, input.policy);
    const domain = input.domain ?? np.name;
    const ruleId = `policy:${np.name}`;
    // Metrics label plain-key checks "(policy)": their domain is whatever the client sent.
    const status = await this.apply(
      "(policy)",
      domain,
      key,
      ruleId,
      np.policyId,
      np.specs,
      np.cost * mult,
      np.shadow,
      nowMs,
      peek,
      `policy ${np.name}`,
    );
    return { domain, status };
  }

  private async decideOne(
    rules: Rules,
    domain: string,
    entries: readonly DescriptorEntry[],
    mult: number,
    nowMs: number,
    peek: boolean,
    callerLimit?: CallerLimit,
  ): Promise<DescriptorStatus> {
    if (!Array.isArray(entries) || entries.length === 0) throw new CheckError("descriptors: each descriptor needs at least one entry");
    const key = descriptorKey(entries);
    if (key.length > 512) throw new CheckError("descriptors: a descriptor's key=value entries must stay under 512 characters");
    if (callerLimit !== undefined) {
      const { requestsPerUnit: rpu, unitMs } = callerLimit;
      if (!Number.isSafeInteger(rpu) || rpu <= 0 || !Number.isSafeInteger(unitMs) || unitMs <= 0) {
        throw new CheckError(`descriptor limit: requests_per_unit and unit must be positive (got ${rpu} per ${unitMs} ms)`);
      }
      const specs: LimitSpec[] = [{ algorithm: "fixed-window", limit: rpu, window: unitMs, name: `${rpu}-per-${unitMs}ms` }];
      // The limiter's namespace derives from the limit, so a changed limit in Envoy's config starts afresh.
      return this.apply(
        domain,
        domain,
        key,
        `${domain}/(descriptor limit)`,
        `caller:${rpu}:${unitMs}`,
        specs,
        mult,
        false,
        nowMs,
        peek,
        "the limit sent with the descriptor (Envoy route config)",
      );
    }
    const m = matchDescriptor(rules, domain, entries);
    const rule: Rule | undefined = m.rule;
    if (rule === undefined) {
      // An override can still apply (e.g. block one address that no rule names).
      const o = this.overrides?.get(domain, key, nowMs);
      if (o !== undefined)
        return this.applyOverride(
          o,
          rules.domains.has(domain) ? domain : "(unknown)",
          domain,
          key,
          `${domain}/${key}`,
          mult,
          nowMs,
          peek,
          `no rule matched (${m.miss ?? ""})`,
        );
      // Label cardinality stays bounded by the rules: a domain no rule names is "(unknown)".
      this.observer?.decision(rules.domains.has(domain) ? domain : "(unknown)", "", "no_match");
      return unlimitedStatus(key, { rule: null, source: "none", why: `not limited: ${m.miss ?? "no rule matched"}` }, false);
    }
    if (rule.unlimited) {
      const via = m.via.join(" > ");
      const o = this.overrides?.get(domain, key, nowMs);
      if (o !== undefined)
        return this.applyOverride(o, domain, domain, key, rule.id, rule.cost * mult, nowMs, peek, `rule ${rule.id} is unlimited`);
      this.observer?.decision(domain, rule.id, "unlimited");
      return unlimitedStatus(key, { rule: rule.id, source: "rule", why: `matched ${via}: unlimited` }, rule.shadow);
    }
    return this.apply(domain, domain, key, rule.id, rule.policyId, rule.specs, rule.cost * mult, rule.shadow, nowMs, peek, m.via);
  }

  private async apply(
    label: string,
    domain: string,
    key: string,
    ruleId: string,
    pid: string,
    specs: readonly LimitSpec[],
    cost: number,
    shadow: boolean,
    nowMs: number,
    peek: boolean,
    /** The match path (`["remote_address", "path=/search*"]`), or a description such as `policy login`. */
    matched: readonly string[] | string,
  ): Promise<DescriptorStatus> {
    const o = this.overrides?.get(domain, key, nowMs);
    if (o !== undefined)
      return this.applyOverride(o, label, domain, key, ruleId, cost, nowMs, peek, `${matchedText(matched)}, policy replaced`);
    const limiter = this.limiterFor(pid, specs);
    if (cost > limiter.maxCost)
      throw new CheckError(`cost: ${cost} is more than rule ${ruleId} could ever admit (at most ${limiter.maxCost})`);
    const stateKey = `${domain}|${key}`;
    const d = await this.run(limiter, stateKey, cost, peek);
    const denied = !d.allowed;
    if (!peek)
      this.observer?.decision(
        label,
        ruleId,
        denied ? (shadow ? "shadow_over_limit" : "over_limit") : "ok",
        denied && !shadow ? stateKey : undefined,
      );
    const allowed = d.allowed || shadow;
    const explain = new DecisionExplain(ruleId, ruleId.startsWith("policy:") ? "policy" : "rule", matched, limiter.limits, d, cost, shadow);
    return statusOf(key, d, allowed, shadow, explain, limiter.limits, cost);
  }

  private async applyOverride(
    o: Override,
    label: string,
    domain: string,
    key: string,
    ruleId: string,
    cost: number,
    nowMs: number,
    peek: boolean,
    context: string,
  ): Promise<DescriptorStatus> {
    const note = o.note ? ` (${o.note})` : "";
    const expiry = o.expiresAtMs !== undefined ? `, until ${new Date(o.expiresAtMs).toISOString()}` : "";
    if (o.policy === "unlimited") {
      if (!peek) this.observer?.decision(label, ruleId, "unlimited");
      return unlimitedStatus(
        key,
        { rule: ruleId, source: "override", why: `${context}; override for ${key}: unlimited${expiry}${note}` },
        false,
      );
    }
    if (o.policy === "blocked") {
      if (!peek) this.observer?.decision(label, ruleId, "blocked", `${domain}|${key}`);
      // A block has no window: Retry-After is the time left on it, or a minute when it has no end.
      const retryAfterMs = o.expiresAtMs !== undefined ? Math.max(1, o.expiresAtMs - nowMs) : 60_000;
      return {
        key,
        allowed: false,
        overLimit: true,
        shadow: false,
        unlimited: false,
        limit: 0,
        remaining: 0,
        retryAfterMs,
        resetAfterMs: retryAfterMs,
        delayMs: 0,
        windowMs: null,
        policy: "blocked",
        reason: "blocked",
        explain: { rule: ruleId, source: "override", why: `${context}; override for ${key}: blocked${expiry}${note}` },
      };
    }
    const limiter = this.overrideLimiterFor(o);
    if (limiter instanceof Error) throw new CheckError(`override for ${domain}/${key} has a bad policy: ${limiter.message}`);
    if (cost > limiter.maxCost)
      throw new CheckError(`cost: ${cost} is more than the override for ${key} could ever admit (at most ${limiter.maxCost})`);
    const stateKey = `${domain}|${key}`;
    const d = await this.run(limiter, stateKey, cost, peek);
    if (!peek) this.observer?.decision(label, ruleId, d.allowed ? "ok" : "over_limit", d.allowed ? undefined : stateKey);
    const why = `${context}; override for ${key}: ${describeLimits(limiter.limits)}${expiry}${note}; ${describeOutcome(d, cost, false)}`;
    return statusOf(key, d, d.allowed, false, { rule: ruleId, source: "override", why }, limiter.limits, cost);
  }

  private async run(limiter: RateLimiter, stateKey: string, cost: number, peek: boolean): Promise<Decision> {
    const t0 = performance.now();
    let d: Decision;
    try {
      d = peek ? await limiter.peek(stateKey, cost) : await limiter.consume(stateKey, cost);
    } catch (e) {
      this.observer?.storeError("error");
      if (e instanceof RangeError) throw new CheckError(e.message);
      throw e;
    }
    this.observer?.storeLatency((performance.now() - t0) / 1000);
    if (d.reason === "store-error" || d.reason === "insurance") this.observer?.storeError("failure_policy");
    return d;
  }
}

function matchedText(matched: readonly string[] | string): string {
  return typeof matched === "string" ? matched : `matched ${matched.join(" > ")}`;
}

/**
 * The explain of a decision by a rule or named policy. Its sentence is built only when read
 * (the JSON API reads it; /v1/auth and gRPC never do): formatting it on every check cost more
 * than the match itself.
 */
class DecisionExplain implements Explain {
  constructor(
    readonly rule: string,
    readonly source: "rule" | "policy",
    private readonly matched: readonly string[] | string,
    private readonly limits: readonly ResolvedLimit[],
    private readonly d: Decision,
    private readonly cost: number,
    private readonly shadow: boolean,
  ) {}

  get why(): string {
    return `${matchedText(this.matched)}: ${describeLimits(this.limits)}; ${describeOutcome(this.d, this.cost, this.shadow)}`;
  }

  toJSON(): Explain {
    return { rule: this.rule, source: this.source, why: this.why };
  }
}

function checkCost(cost: unknown): number {
  if (cost === undefined) return 1;
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0 || cost > MAX_COST) {
    throw new CheckError(`cost: must be a whole number from 1 to ${MAX_COST} (got ${JSON.stringify(cost)})`);
  }
  return cost;
}

function unlimitedStatus(key: string, explain: Explain, shadow: boolean): DescriptorStatus {
  return {
    key,
    allowed: true,
    overLimit: false,
    shadow,
    unlimited: true,
    limit: null,
    remaining: null,
    retryAfterMs: 0,
    resetAfterMs: 0,
    delayMs: 0,
    windowMs: null,
    policy: null,
    reason: null,
    explain,
  };
}

/** What a status was built from, for transports that render headers with the library's HeaderWriter. */
export interface StatusDetail {
  readonly limits: readonly ResolvedLimit[];
  readonly decision: Decision;
  /** The cost charged (request cost x rule cost). */
  readonly cost: number;
}
/** A symbol-keyed property: JSON.stringify leaves it out, and it is cheaper than a WeakMap entry per check. */
const DETAIL = Symbol("ratekeeper.statusDetail");

/** The decision and limits behind a status (undefined for unlimited, unmatched and blocked ones). */
export function statusDetail(s: DescriptorStatus): StatusDetail | undefined {
  return (s as DescriptorStatus & { [DETAIL]?: StatusDetail })[DETAIL];
}

function statusOf(
  key: string,
  d: Decision,
  allowed: boolean,
  shadow: boolean,
  explain: Explain,
  limits: readonly ResolvedLimit[],
  cost: number,
): DescriptorStatus {
  return {
    key,
    allowed,
    overLimit: !d.allowed,
    shadow,
    unlimited: false,
    limit: d.limit,
    remaining: d.remaining,
    retryAfterMs: d.retryAfterMs,
    resetAfterMs: d.resetAfterMs,
    delayMs: d.delayMs,
    windowMs: d.windowMs,
    policy: d.policyName,
    reason: d.reason ?? null,
    explain,
    [DETAIL]: { limits, decision: d, cost },
  } as DescriptorStatus;
}

const LIMIT_TEXT = new WeakMap<readonly ResolvedLimit[], string>();
function describeLimits(limits: readonly ResolvedLimit[]): string {
  let t = LIMIT_TEXT.get(limits);
  if (t === undefined) {
    t = limits.map((l) => `${l.algorithm} ${l.limit} per ${l.windowMs} ms`).join(" + ");
    LIMIT_TEXT.set(limits, t);
  }
  return t;
}

function describeOutcome(d: Decision, cost: number, shadow: boolean): string {
  if (d.reason === "store-error" || d.reason === "insurance")
    return `the store failed; its failure policy ${d.allowed ? "allowed" : "denied"} (${d.reason})`;
  if (d.allowed) return `allowed cost ${cost}, ${d.remaining} left${d.delayMs > 0 ? `, after a ${d.delayMs} ms delay` : ""}`;
  const lim = `limit ${d.policyName} has no room for cost ${cost}; retry after ${d.retryAfterMs} ms`;
  return shadow ? `would deny (${lim}) but the rule is in shadow mode` : `denied: ${lim}`;
}
