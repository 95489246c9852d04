/**
 * The rules file: Envoy-ratelimit style domains and descriptors (envoyproxy/ratelimit's
 * "descriptor list" format: key, optional value, optional trailing-`*` wildcard value, nested
 * descriptors, shadow mode, unlimited), where each rule's policy is the library's own spec object
 * (`{ algorithm, limit, window, ... }` inline, or `limits: [...]`), so one file can also drive
 * the middleware. Structure is checked with zod; every policy with the library's own
 * `resolveLimits`, so the service never accepts a policy the library would reject.
 *
 * ```yaml
 * policies:                       # named policies, for plain-key checks ({ key, policy })
 *   login: { algorithm: gcra, limit: 5, window: 1m, burst: 2 }
 * domains:
 *   - domain: api
 *     descriptors:
 *       - key: remote_address                # any value: one limit per address
 *         algorithm: sliding-window
 *         limit: 100
 *         window: 1m
 *         descriptors:
 *           - key: path
 *             value: /search*                # wildcard prefix
 *             limits:
 *               - { algorithm: fixed-window, limit: 1000, window: 1h }
 *               - { algorithm: gcra, limit: 2, window: 1s, burst: 4 }
 *             cost: 2
 *       - key: user_id
 *         value: vip
 *         unlimited: true
 *       - key: plan
 *         value: free
 *         rate_limit: { unit: minute, requests_per_unit: 10 }   # Envoy's own form also works
 *         shadow: true
 * ```
 */
import { z } from "zod";
import { collectIssues, policyId, resolveLimits, type ConfigIssue, type LimitSpec, type ResolvedLimit } from "ratekeeper";
import { compilePools } from "./pools.js";
import { RulesError, type Level, type NamedPolicy, type Rule, type Rules, type TreeNode } from "./rules.js";

/** Keys of a descriptor node that are structure, not policy. Everything else is the policy spec. */
const STRUCTURAL = new Set([
  "key",
  "value",
  "descriptors",
  "name",
  "cost",
  "shadow",
  "shadow_mode",
  "unlimited",
  "limits",
  "rate_limit",
  "detailed_metric",
  "replaces",
]);
/** Keys of a named policy that are not the spec. */
const POLICY_EXTRA = new Set(["cost", "shadow", "limits"]);

const NAME_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Envoy's `rate_limit.unit` values and their length (envoyproxy/ratelimit README, "Rate limit definition"). */
const UNIT_MS = { second: "1s", minute: "1m", hour: "1h", day: "1d" } as const;

interface NodeInput {
  key: string;
  value?: string | undefined;
  name?: string | undefined;
  cost?: number | undefined;
  shadow?: boolean | undefined;
  shadow_mode?: boolean | undefined;
  unlimited?: boolean | undefined;
  limits?: unknown[] | undefined;
  rate_limit?:
    | {
        unit?: keyof typeof UNIT_MS | undefined;
        requests_per_unit?: number | undefined;
        unlimited?: boolean | undefined;
        name?: string | undefined;
      }
    | undefined;
  descriptors?: NodeInput[] | undefined;
  [k: string]: unknown;
}

const RateLimitBlock = z.strictObject({
  unit: z.enum(["second", "minute", "hour", "day"]).optional(),
  requests_per_unit: z.number().int().positive().optional(),
  unlimited: z.boolean().optional(),
  name: z.string().regex(NAME_RE).optional(),
});

const Node: z.ZodType<NodeInput> = z.lazy(() =>
  z.looseObject({
    key: z
      .string()
      .min(1, "must be a non-empty string")
      .refine((s) => !/[=|\n]/.test(s), "must not contain '=', '|' or a newline"),
    value: z
      .string()
      .min(1, "must be a non-empty string (omit it to match any value)")
      .refine((s) => s.indexOf("*") === -1 || s.indexOf("*") === s.length - 1, "a wildcard '*' may only end the value (a prefix match)")
      .optional(),
    name: z.string().regex(NAME_RE, "must be 1-64 letters, digits, '_', '.', ':' or '-'").optional(),
    cost: z.number().int("must be a whole number").positive("must be > 0").optional(),
    shadow: z.boolean().optional(),
    shadow_mode: z.boolean().optional(),
    unlimited: z.boolean().optional(),
    limits: z.array(z.unknown()).optional(),
    rate_limit: RateLimitBlock.optional(),
    detailed_metric: z.boolean().optional(),
    replaces: z.unknown().optional(),
    descriptors: z.array(Node).optional(),
  }),
);

const Root = z.strictObject({
  concurrency: z.record(z.string(), z.looseObject({})).optional(),
  policies: z
    .record(z.string().regex(NAME_RE, "policy names must be 1-64 letters, digits, '_', '.', ':' or '-'"), z.looseObject({}))
    .optional(),
  domains: z
    .array(
      z.strictObject({
        domain: z.string().regex(NAME_RE, "must be 1-64 letters, digits, '_', '.', ':' or '-'"),
        descriptors: z.array(Node).default([]),
      }),
    )
    .default([]),
});

/** The library's policy id plus the limits' names (which the id leaves out but decisions report). */
function limiterId(limits: readonly ResolvedLimit[]): string {
  return `${policyId(limits)}:${limits.map((l) => `${l.name}${l.shape ? "~shape" : ""}`).join(",")}`;
}

function zodPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

/**
 * Validates a parsed rules document and compiles it.
 * @param doc the parsed YAML (or JSON) document
 * @param file the file name to put in front of every error
 * @throws RulesError listing every problem with its path
 * @example compileRules({ domains: [{ domain: "api", descriptors: [{ key: "user_id", algorithm: "gcra", limit: 10, window: "1s" }] }] }, "rules.yaml")
 */
export function compileRules(doc: unknown, file: string): Rules {
  const parsed = Root.safeParse(doc ?? {});
  if (!parsed.success) {
    throw new RulesError(
      file,
      parsed.error.issues.map((i) => ({ path: zodPath(i.path), message: i.message })),
    );
  }
  const issues: ConfigIssue[] = [];
  const rules: Rule[] = [];
  const domains = new Map<string, Level>();
  parsed.data.domains.forEach((d, di) => {
    const path = `domains[${di}]`;
    if (domains.has(d.domain)) issues.push({ path: `${path}.domain`, message: `duplicate domain "${d.domain}"` });
    domains.set(d.domain, compileLevel(d.descriptors, d.domain, d.domain, `${path}.descriptors`, rules, issues));
  });
  const policies = new Map<string, NamedPolicy>();
  for (const [name, raw] of Object.entries(parsed.data.policies ?? {})) {
    const path = `policies.${name}`;
    const r = raw as Record<string, unknown>;
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
      continue;
    }
    const limits = resolve(specs, path, r.limits !== undefined, issues);
    if (limits) policies.set(name, { name, specs, limits, policyId: limiterId(limits), cost: cost as number, shadow: r.shadow === true });
  }
  const pools = compilePools(parsed.data.concurrency, issues);
  if (issues.length > 0) throw new RulesError(file, issues);
  return { source: file, domains, policies, rules, pools };
}

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

function resolve(specs: LimitSpec[], path: string, asList: boolean, issues: ConfigIssue[]): ResolvedLimit[] | undefined {
  // The library's own resolver: the same checks (and messages) as `new RateLimiter(spec)`.
  // Inline specs are resolved as `[0]`: their issues' `[0].limit` becomes `<path>.limit`.
  const inline = (i: ConfigIssue): ConfigIssue => ({ path: `${path}${i.path.replace(/^\[0\]/, "")}`, message: i.message });
  return collectIssues(issues, () => resolveLimits(specs, asList ? `${path}.limits` : ""), asList ? undefined : inline);
}

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
    if (compiled === undefined && !children)
      issues.push({
        path: at,
        message: "needs a policy ({ algorithm, limit, window }, limits: [...], rate_limit, or unlimited: true) or nested descriptors",
      });
    const node: TreeNode = { rule, children, label };
    if (n.value === undefined) level.anyValue.set(n.key, node);
    else if (n.value.endsWith("*")) level.wildcards.push({ key: n.key, prefix: n.value.slice(0, -1), node });
    else {
      let byValue = level.exact.get(n.key);
      if (byValue === undefined) level.exact.set(n.key, (byValue = new Map<string, TreeNode>()));
      byValue.set(n.value, node);
    }
  });
  return level;
}

/** The rule of a node; undefined when it has no policy; "invalid" when its policy is bad (already reported). */
function compileRule(n: NodeInput, domain: string, id: string, at: string, issues: ConfigIssue[]): Rule | "invalid" | undefined {
  const inline: Record<string, unknown> = {};
  for (const k of Object.keys(n)) if (!STRUCTURAL.has(k) && n[k] !== undefined) inline[k] = n[k];
  const shadow = n.shadow === true || n.shadow_mode === true;
  const cost = n.cost ?? 1;
  const unlimited = n.unlimited === true || n.rate_limit?.unlimited === true;
  let specs: LimitSpec[] | undefined;
  let asList = false;
  if (n.rate_limit !== undefined && !n.rate_limit.unlimited) {
    const { unit, requests_per_unit: rpu } = n.rate_limit;
    if (unit === undefined || rpu === undefined) {
      issues.push({ path: `${at}.rate_limit`, message: "needs unit and requests_per_unit (or unlimited: true)" });
      return "invalid";
    }
    if (n.limits !== undefined || Object.keys(inline).length > 0) {
      issues.push({ path: at, message: "give either rate_limit or a ratekeeper policy, not both" });
      return "invalid";
    }
    // Envoy's ratelimit counts per calendar unit: a clock-aligned fixed window is the same thing.
    specs = [{ algorithm: "fixed-window", limit: rpu, window: UNIT_MS[unit], ...(n.rate_limit.name ? { name: n.rate_limit.name } : {}) }];
  } else {
    const before = issues.length;
    specs = policySpecs(n.limits, inline, at, issues);
    if (specs === undefined && issues.length > before) return "invalid";
    asList = n.limits !== undefined;
  }
  if (unlimited) {
    if (specs !== undefined) {
      issues.push({ path: `${at}.unlimited`, message: "an unlimited rule cannot also have a policy" });
      return "invalid";
    }
    return { id, path: at, domain, specs: [], limits: [], policyId: "unlimited", cost, shadow, unlimited: true };
  }
  if (specs === undefined) return undefined;
  const limits = resolve(specs, at, asList, issues);
  if (!limits) return "invalid";
  const capacity = Math.min(...limits.map((l) => l.capacity));
  if (cost > capacity)
    issues.push({ path: `${at}.cost`, message: `must be at most ${capacity}, the most this policy could ever admit (got ${cost})` });
  // Envoy's RLS reports a rate_limit block's own name ("" when none), as envoyproxy/ratelimit does.
  const rlsName = n.rate_limit !== undefined ? (n.rate_limit.name ?? "") : undefined;
  return { id, path: at, domain, specs, limits, policyId: limiterId(limits), cost, shadow, unlimited: false, rlsName };
}
