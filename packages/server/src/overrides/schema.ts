import { z } from "zod";
import { collectIssues, parseDuration, resolveLimits, type ConfigIssue, type LimitSpec } from "ratekeeper";
import { tooManyLimits } from "../config/policy-cap.js";
import type { Override, StoredOverride } from "./types.js";

/** Longest domain accepted, in characters. */
export const MAX_DOMAIN_LENGTH = 256;
/**
 * Longest key accepted, in characters: the longest key a check can carry (a descriptor's
 * canonical key or a plain key, service/decide.ts), so no override is accepted that could never
 * apply. Also keeps a PostgreSQL NOTIFY payload naming the key well under its 8000-byte limit
 * (https://www.postgresql.org/docs/current/sql-notify.html).
 */
export const MAX_KEY_LENGTH = 512;
/** Longest note accepted, in characters. */
export const MAX_NOTE_LENGTH = 1024;

/**
 * Text both backends store exactly as sent: PostgreSQL text cannot hold U+0000 (the write would
 * fail as a database error), and both drivers send strings as UTF-8, where a lone surrogate
 * becomes U+FFFD, so an override would be stored (and applied) under another key than the one
 * the answer names. The library refuses such limiter keys for the same reason (ratekeeper's key.ts).
 */
export function storable(s: string): boolean {
  return !s.includes("\u0000") && !/\p{Cs}/u.test(s);
}
const STORABLE = "must not contain U+0000 or a lone surrogate";
const text = (max: number) =>
  z.string().min(1, "must not be empty").max(max, `must be at most ${max} characters`).refine(storable, STORABLE);
/** The latest expiry a date can hold (ECMAScript's time range: 8.64e15 ms after the epoch). */
const MAX_EXPIRES_AT_MS = 8.64e15;

/**
 * The JSON document of one override, as the admin API takes it and as `overrides import`
 * reads it (one per line). Either `limits` (a policy of its own, the library's spec objects,
 * the same as a rule in the rules file) or `policy: "blocked" | "unlimited"`; an optional
 * expiry as `expiresAtMs` (ms since the epoch) or `ttl` (a duration from now).
 * @example {"domain":"api","key":"user_id=241531","limits":[{"algorithm":"fixed-window","limit":5,"window":"1s"}]}
 * @example {"domain":"api","key":"ip=203.0.113.9","policy":"blocked","ttl":"1h","note":"abuse, ticket 42"}
 */
export const overrideDocumentSchema = z.strictObject({
  domain: text(MAX_DOMAIN_LENGTH).optional(),
  key: text(MAX_KEY_LENGTH).optional(),
  limits: z.array(z.unknown()).optional(),
  policy: z.enum(["blocked", "unlimited"]).optional(),
  expiresAtMs: z.number().int("must be a whole number of ms since the epoch").positive().max(MAX_EXPIRES_AT_MS).nullable().optional(),
  ttl: z.union([z.number(), z.string()]).optional(),
  note: z.string().max(MAX_NOTE_LENGTH, `must be at most ${MAX_NOTE_LENGTH} characters`).refine(storable, STORABLE).nullable().optional(),
});

/** The shape accepted by {@link parseOverride}. */
export type OverrideDocument = z.input<typeof overrideDocumentSchema>;

/** The result of {@link parseOverride}: an override, or every problem with its path. */
export type ParseResult = { ok: true; override: Override } | { ok: false; issues: ConfigIssue[] };

/** Where the domain and key come from when not in the document (e.g. the URL of a PUT). */
export interface ParseContext {
  /** Wall clock for `ttl`, ms since the epoch. */
  readonly nowMs: number;
  /** Domain fixed by the caller; the document may repeat it but not contradict it. */
  readonly domain?: string | undefined;
  /** Key fixed by the caller; the document may repeat it but not contradict it. */
  readonly key?: string | undefined;
  /** Forces the policy (block / unblock): the document may not carry `limits` or `policy`. */
  readonly policy?: Override["policy"] | undefined;
  /**
   * Accept an `expiresAtMs` at or before `nowMs` (`overrides import --skip-expired`, which then
   * skips the line itself: see {@link pastExpiry}). Otherwise it is a problem. @default false
   */
  readonly allowPastExpiry?: boolean | undefined;
}

/** The start of the problem {@link pastExpiry} reports. */
export const PAST_EXPIRY = "already past";

/**
 * The problem with an override whose `expiresAtMs` is at or before `nowMs`, or undefined. Such an
 * override never applies, yet writing it replaces what the store holds for its key (a live block
 * gone for a stale line): most often a mistake, such as seconds given for milliseconds.
 */
export function pastExpiry(expiresAtMs: number | undefined, nowMs: number): ConfigIssue | undefined {
  if (expiresAtMs === undefined || expiresAtMs > nowMs) return undefined;
  // Seconds read as milliseconds land in the first months of 1970 (under 1% of the time since the
  // epoch). Not "times 1000 is ahead": that holds for any past millisecond time after 21 January
  // 1970 (one that expired a minute ago), and fails for seconds already past as seconds.
  const seconds = expiresAtMs < nowMs / 100 ? "; it looks like seconds: expiresAtMs is milliseconds since the epoch" : "";
  return {
    path: "expiresAtMs",
    message:
      `${PAST_EXPIRY} (${new Date(expiresAtMs).toISOString()}, now ${new Date(nowMs).toISOString()}): ` +
      `an expired override never applies${seconds || " (expiresAtMs is milliseconds since the epoch)"}`,
  };
}

/**
 * Validates one override document with zod (shape) and the library's `resolveLimits`
 * (algorithms and options, exactly as the rules file), collecting every problem with its path,
 * e.g. `limits[0].window: must be a positive whole number of milliseconds ...`.
 * @example parseOverride(JSON.parse(line), { nowMs: Date.now() })
 */
export function parseOverride(input: unknown, ctx: ParseContext): ParseResult {
  const issues: ConfigIssue[] = [];
  const parsed = overrideDocumentSchema.safeParse(input);
  if (!parsed.success) {
    for (const i of parsed.error.issues) issues.push({ path: formatPath(i.path) || "(body)", message: zodMessage(i) });
    return { ok: false, issues };
  }
  const doc = parsed.data;
  const domain = pick("domain", doc.domain, ctx.domain, issues);
  const key = pick("key", doc.key, ctx.key, issues);

  let policy: Override["policy"] | undefined;
  if (ctx.policy !== undefined) {
    if (doc.limits !== undefined) issues.push({ path: "limits", message: "not allowed here (the policy is set by the endpoint)" });
    if (doc.policy !== undefined) issues.push({ path: "policy", message: "not allowed here (the policy is set by the endpoint)" });
    policy = ctx.policy;
  } else if (doc.limits !== undefined && doc.policy !== undefined) {
    issues.push({ path: "policy", message: 'give either "limits" or "policy", not both' });
  } else if (doc.limits !== undefined) {
    const limits = doc.limits as LimitSpec[];
    const capped = tooManyLimits(limits, "limits");
    if (capped) issues.push(capped);
    else if (collectIssues(issues, () => resolveLimits(limits, "limits")) !== undefined) policy = { limits };
  } else if (doc.policy !== undefined) {
    policy = doc.policy;
  } else {
    issues.push({ path: "limits", message: 'required: a non-empty array of limits, or "policy": "blocked" | "unlimited"' });
  }

  let expiresAtMs: number | undefined = doc.expiresAtMs ?? undefined;
  if (doc.ttl !== undefined) {
    if (doc.expiresAtMs !== undefined && doc.expiresAtMs !== null) {
      issues.push({ path: "ttl", message: 'give either "ttl" or "expiresAtMs", not both' });
    } else {
      const ttl = doc.ttl;
      const ttlMs = collectIssues(issues, () => parseDuration(ttl, "ttl"));
      // A later expiry is no date: describing the override (explain.why) would throw on every check.
      if (ttlMs !== undefined && ctx.nowMs + ttlMs > MAX_EXPIRES_AT_MS)
        issues.push({ path: "ttl", message: `must end by ${new Date(MAX_EXPIRES_AT_MS).toISOString()} (got ${ttlMs} ms from now)` });
      else if (ttlMs !== undefined) expiresAtMs = ctx.nowMs + ttlMs;
    }
  }
  const past = ctx.allowPastExpiry === true || doc.ttl !== undefined ? undefined : pastExpiry(expiresAtMs, ctx.nowMs);
  if (past) issues.push(past);
  if (issues.length > 0 || domain === undefined || key === undefined || policy === undefined) return { ok: false, issues };
  const note = doc.note ?? undefined;
  return { ok: true, override: { domain, key, policy, expiresAtMs, note } };
}

function pick(field: "domain" | "key", inDoc: string | undefined, fixed: string | undefined, issues: ConfigIssue[]): string | undefined {
  if (fixed !== undefined) {
    if (inDoc !== undefined && inDoc !== fixed)
      issues.push({ path: field, message: `must match the URL (${JSON.stringify(fixed)}) when given` });
    const max = field === "domain" ? MAX_DOMAIN_LENGTH : MAX_KEY_LENGTH;
    if (fixed.length === 0 || fixed.length > max || !storable(fixed))
      issues.push({ path: field, message: `must be 1-${max} characters without U+0000 or a lone surrogate` });
    return fixed;
  }
  if (inDoc === undefined) issues.push({ path: field, message: "required" });
  return inDoc;
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

function zodMessage(issue: z.core.$ZodIssue): string {
  if (issue.code === "unrecognized_keys") return `unknown field(s) ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}`;
  return issue.message;
}

/** The policy as stored: `"blocked"`, `"unlimited"` or the JSON of `{ limits }`. */
export function serializePolicy(policy: Override["policy"]): string {
  return typeof policy === "string" ? policy : JSON.stringify({ limits: policy.limits });
}

/**
 * Reads a stored policy. `intern` (optional) shares one frozen object between the many
 * overrides that carry the same policy text, so a million overrides do not hold a million copies.
 */
export function deserializePolicy(text: string, intern?: Map<string, Override["policy"]>): Override["policy"] {
  if (text === "blocked" || text === "unlimited") return text;
  const hit = intern?.get(text);
  if (hit !== undefined) return hit;
  const policy = deepFreeze({ limits: storedLimits(text) });
  intern?.set(text, policy);
  return policy;
}

/**
 * The `limits` of a stored policy's text. Text that is not a JSON object with `limits` (a row
 * edited by hand) gives the text itself, at most 200 characters, as the limits: the library
 * refuses it when the service asks for its limiter, and the service then decides the key by its
 * rule and logs the row (service/override.ts). Thrown here, it stopped the overrides cache:
 * every load and every read of the change feed failed on that row.
 */
function storedLimits(text: string): LimitSpec[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (typeof parsed === "object" && parsed !== null && "limits" in parsed) return (parsed as { limits: LimitSpec[] }).limits;
  return text.slice(0, 200) as unknown as LimitSpec[];
}

function deepFreeze<T>(o: T): T {
  if (typeof o === "object" && o !== null) {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/**
 * The JSON document of an override (what export writes and import reads back). With
 * `withMeta`, also `version` and `updatedAtMs` (the admin API's answers).
 */
export function toDocument(o: Override | StoredOverride, withMeta = false): Record<string, unknown> {
  const doc: Record<string, unknown> = { domain: o.domain, key: o.key };
  if (typeof o.policy === "string") doc.policy = o.policy;
  else doc.limits = o.policy.limits;
  if (o.expiresAtMs !== undefined) doc.expiresAtMs = o.expiresAtMs;
  if (o.note !== undefined) doc.note = o.note;
  if (withMeta && "version" in o) {
    doc.version = o.version;
    doc.updatedAtMs = o.updatedAtMs;
  }
  return doc;
}
