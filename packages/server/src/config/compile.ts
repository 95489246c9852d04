/**
 * Compiles a rules document (its shape checked by the zod schema in schema.ts): named policies,
 * concurrency pools (pools.ts), and the descriptor tree, into the matching tree the service walks (rules.ts: Level, TreeNode, Rule): one
 * level per nesting depth, each node's policy resolved by the library's own `resolveLimits`, so
 * the service never accepts a policy the library would reject. A node's policy comes in one of
 * three forms: envoyproxy/ratelimit's `rate_limit` block, ratekeeper's own spec (inline or
 * `limits: [...]`), or `unlimited`; a node with none of them limits nothing.
 */
import { collectIssues, policyId, resolveLimits, type ConfigIssue, type LimitSpec, type ResolvedLimit } from "ratekeeper";
import { tooManyLimits } from "./policy-cap.js";
import { compilePools } from "./pools.js";
import { RulesError, type Level, type NamedPolicy, type Rule, type Rules, type TreeNode } from "./rules.js";
import { NAME_RE, parseRulesDocument, POLICY_EXTRA, STRUCTURAL, UNIT_MS, UNIT_WINDOW, type NodeInput } from "./schema.js";

/**
 * Validates a parsed rules document and compiles it.
 * @param doc the parsed YAML (or JSON) document
 * @param file the file name to put in front of every error
 * @throws RulesError listing every problem with its path
 * @example compileRules({ domains: [{ domain: "api", descriptors: [{ key: "user_id", algorithm: "gcra", limit: 10, window: "1s" }] }] }, "rules.yaml")
 */
export function compileRules(doc: unknown, file: string): Rules {
  const parsed = parseRulesDocument(doc, file);
  const issues: ConfigIssue[] = [];
  const rules: Rule[] = [];
  const domains = new Map<string, Level>();
  parsed.domains.forEach((d, di) => {
    const path = `domains[${di}]`;
    if (domains.has(d.domain)) issues.push({ path: `${path}.domain`, message: `duplicate domain "${d.domain}"` });
    domains.set(d.domain, compileLevel(d.descriptors, d.domain, d.domain, `${path}.descriptors`, rules, issues));
  });
  const policies = new Map<string, NamedPolicy>();
  for (const [name, raw] of Object.entries(parsed.policies ?? {})) {
    const policy = compileNamedPolicy(name, raw, issues);
    if (policy) policies.set(name, policy);
  }
  const pools = compilePools(parsed.concurrency, issues);
  if (issues.length > 0) throw new RulesError(file, issues);
  return { source: file, domains, policies, rules, pools };
}

/** A named policy (`policies.<name>`, for plain-key checks); undefined when invalid (reported). */
function compileNamedPolicy(name: string, r: Record<string, unknown>, issues: ConfigIssue[]): NamedPolicy | undefined {
  const path = `policies.${name}`;
  const spec: Record<string, unknown> = {};
  for (const k of Object.keys(r)) if (!POLICY_EXTRA.has(k)) spec[k] = r[k];
  const specs = policySpecs(r.limits, spec, path, issues);
  const cost = r.cost === undefined ? 1 : r.cost;
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0)
    issues.push({ path: `${path}.cost`, message: `must be > 0 (a whole number; got ${JSON.stringify(cost)})` });
  if (r.shadow !== undefined && typeof r.shadow !== "boolean") issues.push({ path: `${path}.shadow`, message: "must be true or false" });
  if (specs === undefined) {
    if (r.limits === undefined && Object.keys(spec).length === 0)
      issues.push({ path, message: "needs a policy: { algorithm, limit, window } or limits: [...]" });
    return undefined;
  }
  const limits = resolve(specs, path, r.limits !== undefined, issues);
  if (!limits) return undefined;
  // As a rule's (compileRule): with a cost above its capacity every plain-key check on it would be a 400.
  if (typeof cost === "number") checkCostFits(cost, limits, `${path}.cost`, issues);
  return { name, specs, limits, policyId: limiterId(limits), cost: cost as number, shadow: r.shadow === true };
}

/**
 * Reports a rule's or named policy's `cost` above what its limits could ever admit: the smallest
 * capacity, the rule of RateLimiter's `maxCost` (the library's core/max-cost.ts maxCostOf, which
 * it does not export: written again here, once).
 */
function checkCostFits(cost: number, limits: readonly ResolvedLimit[], path: string, issues: ConfigIssue[]): void {
  const capacity = Math.min(...limits.map((l) => l.capacity));
  if (cost > capacity) issues.push({ path, message: `must be at most ${capacity}, the most this policy could ever admit (got ${cost})` });
}

/** The library's policy id plus the limits' names (which the id leaves out but decisions report). */
function limiterId(limits: readonly ResolvedLimit[]): string {
  return `${policyId(limits)}:${limits.map((l) => `${l.name}${l.shape ? "~shape" : ""}`).join(",")}`;
}

/** The specs of a policy given inline (`algorithm: ...` beside the structure) or as `limits: [...]`; undefined when neither (or both: reported). */
function policySpecs(limitsField: unknown, inline: Record<string, unknown>, path: string, issues: ConfigIssue[]): LimitSpec[] | undefined {
  const hasInline = Object.keys(inline).length > 0;
  if (limitsField !== undefined && hasInline) {
    issues.push({
      path,
      message: `give the policy either inline (algorithm, limit, window, ...) or under limits, not both (found ${Object.keys(inline).join(", ")} beside limits)`,
    });
    return undefined;
  }
  if (limitsField !== undefined) return limitsField as LimitSpec[];
  if (hasInline) return [inline as unknown as LimitSpec];
  return undefined;
}

/** The specs resolved by the library (its checks and messages, under this rule's path); undefined when invalid (reported). */
function resolve(specs: LimitSpec[], path: string, asList: boolean, issues: ConfigIssue[]): ResolvedLimit[] | undefined {
  // The library's own resolver: the same checks (and messages) as `new RateLimiter(spec)`.
  // Inline specs are resolved as `[0]`: their issues' `[0].limit` becomes `<path>.limit`.
  const inline = (i: ConfigIssue): ConfigIssue => ({ path: `${path}${i.path.replace(/^\[0\]/, "")}`, message: i.message });
  const capped = asList ? tooManyLimits(specs, `${path}.limits`) : undefined;
  if (capped) {
    issues.push(capped);
    return undefined;
  }
  return collectIssues(issues, () => resolveLimits(specs, asList ? `${path}.limits` : ""), asList ? undefined : inline);
}

/** One level of descriptor nodes (and, recursively, their children); every rule found is also pushed to `rules`. */
function compileLevel(
  nodes: readonly NodeInput[],
  domain: string,
  idPrefix: string,
  path: string,
  rules: Rule[],
  issues: ConfigIssue[],
): Level {
  const level: Level = { exact: new Map(), wildcards: [], anyValue: new Map() };
  const seen = new Set<string>();
  nodes.forEach((n, i) => {
    const at = `${path}[${i}]`;
    const label = n.value === undefined ? n.key : `${n.key}=${n.value}`;
    if (seen.has(label)) issues.push({ path: at, message: `duplicate descriptor ${label} at this level` });
    seen.add(label);
    const id = `${idPrefix}/${label}`;
    const compiled = compileRule(n, domain, n.name ?? id, at, issues);
    const rule = compiled === "invalid" ? undefined : compiled;
    if (rule) rules.push(rule);
    const children =
      n.descriptors && n.descriptors.length > 0 ? compileLevel(n.descriptors, domain, id, `${at}.descriptors`, rules, issues) : undefined;
    // A node with neither a policy nor nested descriptors matches and limits nothing: it lets
    // its value through (envoyproxy/ratelimit's "whitelisting").
    const node: TreeNode = n.value_to_metric === true ? { rule, children, label, valueToMetric: true } : { rule, children, label };
    if (n.value === undefined) level.anyValue.set(n.key, node);
    else if (n.value.includes("*"))
      level.wildcards.push({ key: n.key, parts: n.value.split("*"), node, shared: n.share_threshold === true });
    else {
      let byValue = level.exact.get(n.key);
      if (byValue === undefined) level.exact.set(n.key, (byValue = new Map<string, TreeNode>()));
      byValue.set(n.value, node);
    }
  });
  return level;
}

/** A node's policy: specs to resolve, envoyproxy/ratelimit's deny-all (`requests_per_unit: 0`), or none. */
type NodePolicy = { specs: LimitSpec[]; asList: boolean } | { denyAll: NonNullable<Rule["denyAll"]>; unit: string } | undefined;

/** The rule of a node; undefined when it has no policy; "invalid" when its policy is bad (already reported). */
function compileRule(n: NodeInput, domain: string, id: string, at: string, issues: ConfigIssue[]): Rule | "invalid" | undefined {
  const inline: Record<string, unknown> = {};
  for (const k of Object.keys(n)) if (!STRUCTURAL.has(k) && n[k] !== undefined) inline[k] = n[k];
  if (!wellFormed(n, inline, at, issues)) return "invalid";
  const policy =
    n.rate_limit !== undefined && !n.rate_limit.unlimited ? rateLimitPolicy(n, inline, at, issues) : ownPolicy(n, inline, at, issues);
  if (policy === "invalid") return "invalid";
  const base = { id, path: at, domain, cost: n.cost ?? 1, shadow: n.shadow === true || n.shadow_mode === true };
  const replaces = (n.rate_limit?.replaces ?? []).map((r) => r.name ?? "");
  if (n.unlimited === true || n.rate_limit?.unlimited === true) {
    if (policy !== undefined) {
      issues.push({ path: `${at}.unlimited`, message: "an unlimited rule cannot also have a policy" });
      return "invalid";
    }
    return { ...base, specs: [], limits: [], policyId: "unlimited", unlimited: true, rlsName: n.rate_limit?.name, replaces };
  }
  if (policy === undefined) return undefined;
  // Envoy's RLS reports a rate_limit block's own name ("" when none), as envoyproxy/ratelimit does.
  const rlsName = n.rate_limit !== undefined ? (n.rate_limit.name ?? "") : undefined;
  const envoy = { unlimited: false, rlsName, replaces, detailedMetric: n.detailed_metric === true, quotaMode: n.quota_mode === true };
  if ("denyAll" in policy)
    return { ...base, specs: [], limits: [], policyId: `deny-all:${policy.unit}`, denyAll: policy.denyAll, ...envoy };
  const limits = resolve(policy.specs, at, policy.asList, issues);
  if (!limits) return "invalid";
  checkCostFits(base.cost, limits, `${at}.cost`, issues);
  return { ...base, specs: policy.specs, limits, policyId: limiterId(limits), ...envoy };
}

/** Checks that need the whole node: share_threshold only on wildcards; no unknown keys (a misspelling). */
function wellFormed(n: NodeInput, inline: Record<string, unknown>, at: string, issues: ConfigIssue[]): boolean {
  if (n.share_threshold === true && !(n.value ?? "").includes("*")) {
    issues.push({
      path: `${at}.share_threshold`,
      message: `can only be used with wildcard values (containing '*'), but found ${n.key}=${n.value ?? ""}`,
    });
    return false;
  }
  // Keys that are neither envoyproxy/ratelimit's nor a ratekeeper policy (which needs an algorithm): a misspelling.
  if (Object.keys(inline).length > 0 && inline.algorithm === undefined) {
    issues.push({
      path: at,
      message: `unknown key ${Object.keys(inline)
        .map((k) => `'${k}'`)
        .join(", ")} (known: ${[...STRUCTURAL].join(", ")}, or a policy: algorithm, limit, window, ...)`,
    });
    return false;
  }
  return true;
}

/** envoyproxy/ratelimit's `rate_limit: { unit, requests_per_unit }`: a clock-aligned fixed window, or deny-all at 0. */
function rateLimitPolicy(n: NodeInput, inline: Record<string, unknown>, at: string, issues: ConfigIssue[]): NodePolicy | "invalid" {
  const { unit, requests_per_unit: rpu = 0, name = "" } = n.rate_limit ?? {};
  if (unit === undefined) {
    issues.push({
      path: `${at}.rate_limit.unit`,
      message: "required: second, minute, hour, day, week, month or year (or unlimited: true)",
    });
    return "invalid";
  }
  if (n.limits !== undefined || Object.keys(inline).length > 0) {
    issues.push({ path: at, message: "give either rate_limit or a ratekeeper policy, not both" });
    return "invalid";
  }
  if (rpu === 0) return { denyAll: { windowMs: UNIT_MS[unit], name: `0-per-1${unit}` }, unit };
  // Envoy's ratelimit counts per calendar unit: a clock-aligned fixed window is the same thing.
  const named = NAME_RE.test(name) ? { name } : {};
  return { specs: [{ algorithm: "fixed-window", limit: rpu, window: UNIT_WINDOW[unit], ...named }], asList: false };
}

/** ratekeeper's own policy: inline (`algorithm: ...`) or `limits: [...]`. */
function ownPolicy(n: NodeInput, inline: Record<string, unknown>, at: string, issues: ConfigIssue[]): NodePolicy | "invalid" {
  const before = issues.length;
  const specs = policySpecs(n.limits, inline, at, issues);
  if (specs === undefined) return issues.length > before ? "invalid" : undefined;
  return { specs, asList: n.limits !== undefined };
}
