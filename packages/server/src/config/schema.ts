/**
 * The rules file: Envoy-ratelimit style domains and descriptors (envoyproxy/ratelimit's
 * "descriptor list" format: key, optional value, optional trailing-`*` wildcard value, nested
 * descriptors, shadow mode, unlimited), where each rule's policy is the library's own spec object
 * (`{ algorithm, limit, window, ... }` inline, or `limits: [...]`), so one file can also drive
 * the middleware. This file is the document's shape, checked with zod; compile.ts turns it into
 * the matching tree, every policy checked by the library's own `resolveLimits`.
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
import { RulesError } from "./rules.js";

/** Keys of a descriptor node that are structure, not policy. Everything else is the policy spec. */
export const STRUCTURAL = new Set([
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
export const POLICY_EXTRA = new Set(["cost", "shadow", "limits"]);

export const NAME_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Envoy's `rate_limit.unit` values (any case) and their length, as envoyproxy/ratelimit counts
 * them (src/utils/utilities.go: a MONTH is 30 days, a YEAR 365).
 */
export const UNIT_MS = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
} as const;

/** The same lengths as the library's durations, so default policy names read `5-per-1m`. */
export const UNIT_WINDOW = { second: "1s", minute: "1m", hour: "1h", day: "1d", week: "7d", month: "30d", year: "365d" } as const;

export interface NodeInput {
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
    // A uint32 there: a larger number is refused by its YAML decoder, as here.
    requests_per_unit: z
      .number()
      .int("must be a whole number")
      .nonnegative("must be 0 or more")
      .max(4_294_967_295, "must be at most 4294967295 (a uint32, as in envoyproxy/ratelimit)")
      .optional(),
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

function zodPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

/** A rules document checked against the schema (either form: `domains:` or envoyproxy/ratelimit's one domain). */
export type RulesDocument = z.output<typeof Root>;

/**
 * Checks a parsed YAML (or JSON) document's shape.
 * @throws RulesError listing every problem with its path, each prefixed by `file`
 */
export function parseRulesDocument(doc: unknown, file: string): RulesDocument {
  const parsed = Root.safeParse(asDomainsDocument(doc));
  if (!parsed.success) {
    throw new RulesError(
      file,
      parsed.error.issues.map((i) => ({ path: zodPath(i.path), message: i.message })),
    );
  }
  return parsed.data;
}
