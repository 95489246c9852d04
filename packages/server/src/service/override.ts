/**
 * A descriptor decided under an override from the configuration store (overrides/): unlimited,
 * blocked, or the override's own policy in place of the rule's.
 */
import type { Override, OverrideLookup } from "../overrides/types.js";
import type { Application } from "./check.js";
import type { FaultLog } from "./config-faults.js";
import { adjusted } from "./costs.js";
import { stateKey } from "./descriptor-key.js";
import { describeLimits, describeOutcome } from "./explain.js";
import type { LimiterCache } from "./limiters.js";
import { blockedStatus, decidedStatus, unlimitedStatus } from "./status.js";
import type { StoreTimer } from "./store-call.js";
import { CheckError, type DecisionObserver, type DescriptorStatus } from "./types.js";

/** What deciding under an override needs from the decision service. */
export interface OverrideDeps {
  readonly limiters: LimiterCache;
  readonly observer: DecisionObserver | undefined;
  readonly timer: StoreTimer;
  /** Where an override the operator's configuration made unusable is reported, once. */
  readonly faults: FaultLog;
}

/** The log line of an override whose limits admit less than one request of its rule costs. */
export const BELOW_RULE_COST = "override admits less than its rule's cost: every check of its key is denied";

/** The log line of an override the service ignores because the library refuses its stored policy. */
export const REFUSED_POLICY = "override ignored: the library refuses its stored policy; its key is decided by its rule";

/**
 * The overrides the service can apply. An override whose stored policy the library refuses (a
 * row edited in the database by hand, or written by a newer version with an algorithm or option
 * this one lacks: the admin API and `overrides import` validate what they write) is left out,
 * and logged once per row: its key is decided by its rule, the default limiting as it does when
 * no override is there, as the service goes on deciding with what it holds when the overrides
 * database fails. Answering its checks 400 blamed every client for the stored data; 503 would
 * have the proxy's failure mode decide (Envoy's default lets every request through).
 */
export class UsableOverrides implements OverrideLookup {
  constructor(
    private readonly lookup: OverrideLookup,
    private readonly limiters: LimiterCache,
    private readonly faults: FaultLog,
  ) {}

  get(domain: string, key: string, nowMs: number): Override | undefined {
    const o = this.lookup.get(domain, key, nowMs);
    if (o === undefined || typeof o.policy === "string") return o;
    const limiter = this.limiters.forOverride(o);
    if (!(limiter instanceof Error)) return o;
    this.faults.once(o, "policy", REFUSED_POLICY, () => ({ domain, key, problem: limiter.message }));
    return undefined;
  }
}

/** Decides one descriptor under an override: unlimited, blocked, or its own policy. `cost` is the total charged. */
export async function applyOverride(
  deps: OverrideDeps,
  o: Override,
  a: Omit<Application, "policy" | "matched" | "ruleId"> & {
    /**
     * The rule, or undefined where no rule matched: the answer then names the override
     * `<domain>/<key>`, and the metrics and dashboard count it under `(override)` (keys are
     * never labels: blocking many addresses must not make a series per address).
     */
    readonly ruleId: string | undefined;
    /** The client's cost (0: check only, charge nothing). */
    readonly cost: number;
    /** What the rule charges per unit of it (its `cost`); 1 where no rule applies. @default 1 */
    readonly ruleCost?: number | undefined;
    readonly context: string;
  },
): Promise<DescriptorStatus> {
  const { check, key } = a;
  const ruleId = a.ruleId ?? `${a.domain}/${key}`;
  const label = a.ruleId ?? "(override)";
  // Check only (cost 0): what a request of cost 1 would get, charging nothing.
  const checkOnly = a.cost === 0;
  const ruleCost = a.ruleCost ?? 1;
  const cost = ruleCost * (checkOnly ? 1 : a.cost);
  const peek = check.peek || checkOnly;
  const note = o.note ? ` (${o.note})` : "";
  const expiry = o.expiresAtMs !== undefined ? `, until ${new Date(o.expiresAtMs).toISOString()}` : "";
  const whyStart = `${a.context}; override for ${key}: `;
  if (o.policy === "unlimited") {
    if (!peek) deps.observer?.decision(a.label, label, "unlimited");
    return unlimitedStatus(key, { rule: ruleId, source: "override", why: `${whyStart}unlimited${expiry}${note}` }, false);
  }
  if (o.policy === "blocked") {
    if (!peek) deps.observer?.decision(a.label, label, "blocked", stateKey(a.domain, key));
    const explain = { rule: ruleId, source: "override" as const, why: `${whyStart}blocked${expiry}${note}` };
    return blockedStatus(key, explain, o.expiresAtMs, check.nowMs);
  }
  const limiter = deps.limiters.forOverride(o);
  // UsableOverrides let no such override through: a bug here (500), not the client's input.
  if (limiter instanceof Error) throw new Error(`override for ${a.domain}/${key} has a policy the library refuses`, { cause: limiter });
  const oversize = cost > limiter.maxCost;
  // The rule's own cost above what the override admits is the operator's configuration, whatever
  // the client sent: denied, as Envoy's RLS denies any oversize cost. Only a cost the client's
  // own made too large is the client's error.
  const configured = ruleCost > limiter.maxCost;
  if (oversize && !configured && !check.oversizeDeny)
    throw new CheckError(`cost: ${cost} is more than the override for ${key} could ever admit (at most ${limiter.maxCost})`);
  const fault = configured ? belowRuleCost(deps, o, { ...a, ruleId, ruleCost, maxCost: limiter.maxCost }) : "";
  const state = stateKey(a.domain, key);
  const kind = oversize ? "oversize" : checkOnly ? "check-only" : "charged";
  const raw = await deps.timer.run(limiter, state, oversize ? 1 : cost, peek || oversize);
  if (kind === "charged" && check.recording) check.charged(raw, { limiter, state, cost, label: a.label, rule: label });
  const d = adjusted(raw, kind, cost);
  if (!peek) deps.observer?.decision(a.label, label, d.allowed ? "ok" : "over_limit", d.allowed ? undefined : state);
  const why = `${whyStart}${describeLimits(limiter.limits)}${expiry}${note}; ${describeOutcome(d, cost, false)}${fault}`;
  return decidedStatus(key, d, d.allowed, false, { rule: ruleId, source: "override", why }, limiter.limits, cost);
}

/** Logs (once per override and rule) an override that admits less than its rule's cost; the text `why` adds. */
function belowRuleCost(
  deps: OverrideDeps,
  o: Override,
  f: { readonly domain: string; readonly key: string; readonly ruleId: string; readonly ruleCost: number; readonly maxCost: number },
): string {
  const fields = () => ({ domain: f.domain, key: f.key, rule: f.ruleId, ruleCost: f.ruleCost, overrideAdmitsAtMost: f.maxCost });
  const id = deps.faults.once(o, `${f.ruleId}\u0000${f.ruleCost}`, BELOW_RULE_COST, fields);
  return (
    `; rule ${f.ruleId} costs ${f.ruleCost} a request, more than this override could ever admit (at most ${f.maxCost}):` +
    ` no request of this key is admitted until one of them changes; the service's log has it, error id ${id}`
  );
}
