import type { Decision, ResolvedLimit } from "ratekeeper";
import type { CompiledPolicy } from "../config/rules.js";
import type { Application } from "./check.js";
import { matchedText } from "./explain.js";
import type { CheckResult, DecisionObserver, DescriptorStatus, Explain } from "./types.js";

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

/** The status of a descriptor a limiter decided. `allowed` differs from `d.allowed` in shadow mode. */
export function decidedStatus(
  key: string,
  d: Decision,
  allowed: boolean,
  shadow: boolean,
  explain: Explain,
  limits: readonly ResolvedLimit[],
  cost: number,
): DescriptorStatus {
  const s = {
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
  } as DescriptorStatus & { [DETAIL]?: StatusDetail };
  // Set after the literal, not inside it: a computed key in a literal is defined by a runtime call
  // on every check (about 1% of a GET /v1/auth CPU profile), a store of a known symbol is not.
  s[DETAIL] = { limits, decision: d, cost };
  return s;
}

/** The status of a descriptor that nothing limits (no rule matched, an unlimited rule or override). */
export function unlimitedStatus(key: string, explain: Explain, shadow: boolean): DescriptorStatus {
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

/**
 * The status of a blocked key. A block has no window: Retry-After is the time left on it, or a
 * minute when it has no end.
 */
export function blockedStatus(key: string, explain: Explain, expiresAtMs: number | undefined, nowMs: number): DescriptorStatus {
  const retryAfterMs = expiresAtMs !== undefined ? Math.max(1, expiresAtMs - nowMs) : 60_000;
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
    explain,
  };
}

/** The RLS `current_limit.name` of a status (a symbol-keyed property, as {@link statusDetail}). */
const RLS_NAME = Symbol("ratekeeper.rlsName");

/** Marks a status decided by a `quota_mode` policy (a symbol-keyed property, as {@link RLS_NAME}). */
const QUOTA = Symbol("ratekeeper.quotaMode");

type Marked = DescriptorStatus & { [RLS_NAME]?: string; [QUOTA]?: true };

/**
 * Records what the policy adds to its status: the name Envoy's RLS reports (see
 * `CompiledPolicy.rlsName`) and its `quota_mode` (see {@link overallAllowed}); returns the status.
 */
export function withRlsName(
  s: DescriptorStatus,
  policy: { readonly rlsName?: string | undefined; readonly quotaMode?: boolean | undefined },
): DescriptorStatus {
  if (policy.rlsName !== undefined) (s as Marked)[RLS_NAME] = policy.rlsName;
  if (policy.quotaMode === true) (s as Marked)[QUOTA] = true;
  return s;
}

/**
 * Whether a check with these statuses is allowed, as envoyproxy/ratelimit decides its overall
 * code: denied when an ordinary descriptor denies, or when the check has `quota_mode` descriptors
 * and every one of them denies (one over its quota alone does not deny).
 */
export function overallAllowed(statuses: readonly DescriptorStatus[]): boolean {
  let quota = 0;
  let quotaDenied = 0;
  for (const s of statuses) {
    if ((s as Marked)[QUOTA] !== true) {
      if (!s.allowed) return false;
    } else {
      quota++;
      if (!s.allowed) quotaDenied++;
    }
  }
  return quota === 0 || quotaDenied < quota;
}

/** The name Envoy's RLS reports in `current_limit.name`: the policy's `rlsName`, else the deciding limit's name. */
export function rlsName(s: DescriptorStatus): string {
  return (s as DescriptorStatus & { [RLS_NAME]?: string })[RLS_NAME] ?? s.policy ?? "";
}

/**
 * The status under a limit of 0 requests per window (envoyproxy/ratelimit's
 * `requests_per_unit: 0`): always over the limit, until the end of the clock-aligned window.
 * `allowed` is true in shadow mode.
 */
export function denyAllStatus(
  key: string,
  deny: { readonly windowMs: number; readonly name: string },
  shadow: boolean,
  explain: Explain,
  nowMs: number,
): DescriptorStatus {
  const untilEndMs = deny.windowMs - (nowMs % deny.windowMs);
  return {
    key,
    allowed: shadow,
    overLimit: true,
    shadow,
    unlimited: false,
    limit: 0,
    remaining: 0,
    retryAfterMs: untilEndMs,
    resetAfterMs: untilEndMs,
    delayMs: 0,
    windowMs: deny.windowMs,
    policy: deny.name,
    reason: "limit",
    explain,
  };
}

/** A policy of 0 requests per window (envoyproxy/ratelimit's `requests_per_unit: 0`): every request is over. */
export function deniedAll(
  observer: DecisionObserver | undefined,
  a: Application,
  deny: NonNullable<CompiledPolicy["denyAll"]>,
  state: string,
  peek: boolean,
): DescriptorStatus {
  const shadow = a.policy.shadow;
  if (!peek) {
    observer?.decision(a.label, a.ruleId, shadow ? "shadow_over_limit" : "over_limit", shadow ? undefined : state);
    if (a.stat !== undefined) observer?.limitHit?.(a.stat, 0, 0, a.policy.cost * a.cost);
  }
  const source = a.ruleId.startsWith("policy:") ? "policy" : "rule";
  const why = `${matchedText(a.matched)}: ${deny.name}, every request is over the limit`;
  return withRlsName(denyAllStatus(a.key, deny, shadow, { rule: a.ruleId, source, why }, a.check.nowMs), a.policy);
}

/** The result of a check with one descriptor. */
export function single(domain: string, s: DescriptorStatus): CheckResult {
  return { allowed: s.allowed, domain, statuses: [s] };
}
