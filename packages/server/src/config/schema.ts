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
  "quota_mode",
  "value_to_metric",
  "share_threshold",
  "metadata",
]);
/** Keys of a named policy that are not the spec. */
const POLICY_EXTRA = new Set(["cost", "shadow", "limits"]);

const NAME_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Envoy's `rate_limit.unit` values (any case) and their length, as envoyproxy/ratelimit counts
 * them (src/utils/utilities.go: a MONTH is 30 days, a YEAR 365).
 */
const UNIT_MS = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
} as const;

/** The same lengths as the library's durations, so default policy names read `5-per-1m`. */
const UNIT_WINDOW = { second: "1s", minute: "1m", hour: "1h", day: "1d", week: "7d", month: "30d", year: "365d" } as const;

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
        replaces?: Array<{ name?: string | null | undefined }> | undefined;
      }
    | undefined;
  descriptors?: NodeInput[] | undefined;
  [k: string]: unknown;
}

/** envoyproxy/ratelimit's `rate_limit` block, every key of it (src/config/config_impl.go). */
const RateLimitBlock = z
  .strictObject({
    unit: z
      .preprocess(
        (u) => (typeof u === "string" ? u.toLowerCase() : u),
        z.enum(["second", "minute", "hour", "day", "week", "month", "year"], "must be second, minute, hour, day, week, month or year"),
      )
      .optional(),
    // 0 (or none) puts every request over the limit, as in envoyproxy/ratelimit.
    requests_per_unit: z.number().int("must be a whole number").nonnegative("must be 0 or more").optional(),
    unlimited: z.boolean().optional(),
    name: z.string().optional(),
    replaces: z.array(z.strictObject({ name: z.string().nullish() })).optional(),
  })
  .superRefine((r, ctx) => {
    if (r.unlimited === true && r.unit !== undefined)
      ctx.addIssue({ code: "custom", path: ["unit"], message: "should not specify rate limit unit when unlimited" });
    for (const [i, e] of (r.replaces ?? []).entries()) {
      if (!e.name) ctx.addIssue({ code: "custom", path: ["replaces", i, "name"], message: "should not have an empty replaces entry" });
      else if (e.name === r.name)
        ctx.addIssue({ code: "custom", path: ["replaces", i, "name"], message: "replaces should not contain name of same descriptor" });
    }
  });

const Node: z.ZodType<NodeInput> = z.lazy(() =>
  z.looseObject({
    key: z
      .string()
      .min(1, "must be a non-empty string")
      .refine((s) => !/[=|\n]/.test(s), "must not contain '=', '|' or a newline"),
    // "" is no value (any value matches), as in envoyproxy/ratelimit; '*' matches any run of characters.
    value: z
      .string()
      .transform((v) => (v === "" ? undefined : v))
      .optional(),
    name: z.string().regex(NAME_RE, "must be 1-64 letters, digits, '_', '.', ':' or '-'").optional(),
    cost: z.number().int("must be a whole number").positive("must be > 0").optional(),
    shadow: z.boolean().optional(),
    shadow_mode: z.boolean().optional(),
    unlimited: z.boolean().optional(),
    limits: z.array(z.unknown()).optional(),
    rate_limit: RateLimitBlock.optional(),
    detailed_metric: z.boolean().optional(),
    quota_mode: z.boolean().optional(),
    value_to_metric: z.boolean().optional(),
    share_threshold: z.boolean().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
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

/**
 * envoyproxy/ratelimit's files hold one domain each (`domain:` and `descriptors:` at the top):
 * such a document is read as a `domains:` list of one, so both forms go through one schema.
 * `domain: ""` stays a string so the schema names it.
 */
function asDomainsDocument(doc: unknown): unknown {
  if (doc === null || doc === undefined) return {};
  if (!isEnvoyForm(doc)) return doc;
  const { domain, descriptors, ...rest } = doc;
  return { ...rest, domains: [{ domain, descriptors: descriptors ?? [] }] };
}

/** Whether a parsed document is in envoyproxy/ratelimit's one-domain form (`domain:` or `descriptors:` at the top). */
export function isEnvoyForm(doc: unknown): doc is Record<string, unknown> {
  return typeof doc === "object" && doc !== null && !Array.isArray(doc) && ("domain" in doc || "descriptors" in doc);
}

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
  const parsed = Root.safeParse(asDomainsDocument(doc));
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

/** The rule of a node; undefined when it has no policy; "invalid" when its policy is bad (already reported). */
function compileRule(n: NodeInput, domain: string, id: string, at: string, issues: ConfigIssue[]): Rule | "invalid" | undefined {
  const inline: Record<string, unknown> = {};
  for (const k of Object.keys(n)) if (!STRUCTURAL.has(k) && n[k] !== undefined) inline[k] = n[k];
  if (n.share_threshold === true && !(n.value ?? "").includes("*")) {
    issues.push({
      path: `${at}.share_threshold`,
      message: `can only be used with wildcard values (containing '*'), but found ${n.key}=${n.value ?? ""}`,
    });
    return "invalid";
  }
  // Keys that are neither envoyproxy/ratelimit's nor a ratekeeper policy (which needs an algorithm): a misspelling.
  if (Object.keys(inline).length > 0 && inline.algorithm === undefined) {
    issues.push({
      path: at,
      message: `unknown key ${Object.keys(inline)
        .map((k) => `'${k}'`)
        .join(", ")} (known: ${[...STRUCTURAL].join(", ")}, or a policy: algorithm, limit, window, ...)`,
    });
    return "invalid";
  }
  const shadow = n.shadow === true || n.shadow_mode === true;
  const cost = n.cost ?? 1;
  const unlimited = n.unlimited === true || n.rate_limit?.unlimited === true;
  let specs: LimitSpec[] | undefined;
  let asList = false;
  if (n.rate_limit !== undefined && !n.rate_limit.unlimited) {
    const { unit, requests_per_unit: rpu = 0 } = n.rate_limit;
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
    const rlsName = n.rate_limit.name ?? "";
    const replaces = (n.rate_limit.replaces ?? []).map((r) => r.name ?? "");
    if (rpu === 0) {
      const denyAll = { windowMs: UNIT_MS[unit], name: `0-per-1${unit}` };
      return {
        id,
        path: at,
        domain,
        specs: [],
        limits: [],
        policyId: `deny-all:${unit}`,
        cost,
        shadow,
        unlimited: false,
        denyAll,
        rlsName,
        replaces,
        detailedMetric: n.detailed_metric === true,
      };
    }
    // Envoy's ratelimit counts per calendar unit: a clock-aligned fixed window is the same thing.
    const named = NAME_RE.test(rlsName) ? { name: rlsName } : {};
    specs = [{ algorithm: "fixed-window", limit: rpu, window: UNIT_WINDOW[unit], ...named }];
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
    const rlsName = n.rate_limit?.name;
    const replaces = (n.rate_limit?.replaces ?? []).map((r) => r.name ?? "");
    return { id, path: at, domain, specs: [], limits: [], policyId: "unlimited", cost, shadow, unlimited: true, rlsName, replaces };
  }
  if (specs === undefined) return undefined;
  const limits = resolve(specs, at, asList, issues);
  if (!limits) return "invalid";
  const capacity = Math.min(...limits.map((l) => l.capacity));
  if (cost > capacity)
    issues.push({ path: `${at}.cost`, message: `must be at most ${capacity}, the most this policy could ever admit (got ${cost})` });
  // Envoy's RLS reports a rate_limit block's own name ("" when none), as envoyproxy/ratelimit does.
  const rlsName = n.rate_limit !== undefined ? (n.rate_limit.name ?? "") : undefined;
  const replaces = (n.rate_limit?.replaces ?? []).map((r) => r.name ?? "");
  const detailedMetric = n.detailed_metric === true;
  return {
    id,
    path: at,
    domain,
    specs,
    limits,
    policyId: limiterId(limits),
    cost,
    shadow,
    unlimited: false,
    rlsName,
    replaces,
    detailedMetric,
  };
}
