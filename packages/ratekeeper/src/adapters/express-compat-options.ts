import type { NextFunction, Request, Response } from "express";
import type { RateLimitOptions } from "../http/core.js";
import { describeNonPlain, isPlainObject } from "../http/plain-object.js";

/**
 * express-rate-limit's options (v7/v8), accepted by `ratekeeper/express`'s `rateLimit` with the
 * same meaning, as a mapping onto ratekeeper's middleware: not a second limiter. The decision is
 * ratekeeper's (`fixed-window` with `align: "first-request"`, which is what express-rate-limit's
 * MemoryStore does: each client's window opens at its first request); the headers, the 429 answer,
 * `req.rateLimit`, `resetKey` and `getKey` are written in express-rate-limit's formats.
 * docs/migrating-from-express-rate-limit.md has the table and the few differences.
 */
export interface ExpressRateLimitCompatOptions {
  /** Window length in ms. @default 60_000 */
  windowMs?: number;
  /** Requests per window per client, or a function of the request; 0 refuses every request. @default 5 */
  limit?: number | ((req: Request, res: Response) => number | Promise<number>);
  /** Old name of `limit`. */
  max?: number | ((req: Request, res: Response) => number | Promise<number>);
  /** The 429's body (`res.send(message)`), or a function of the request. @default "Too many requests, please try again later." */
  message?: unknown;
  /** @default 429 */
  statusCode?: number;
  /** Sends the refusal. @default res.status(statusCode).send(message) */
  handler?: (req: Request, res: Response, next: NextFunction, options: ResolvedCompat) => unknown;
  /** The client's key. @default the client address (`req.ip`), IPv6 grouped by `ipv6Subnet` */
  keyGenerator?: (req: Request, res: Response) => string | Promise<string>;
  skip?: (req: Request, res: Response) => boolean | Promise<boolean>;
  skipSuccessfulRequests?: boolean;
  skipFailedRequests?: boolean;
  /** @default res.statusCode < 400 */
  requestWasSuccessful?: (req: Request, res: Response) => boolean | Promise<boolean>;
  /** `true` is `"draft-6"`. @default false */
  standardHeaders?: boolean | "draft-6" | "draft-7" | "draft-8";
  /** X-RateLimit-Limit, -Remaining, -Reset. @default true */
  legacyHeaders?: boolean;
  /** @deprecated express-rate-limit 6's name of `legacyHeaders`. */
  headers?: boolean;
  /** Seconds in a refusal's `Retry-After` (sent with either kind of headers), or a function of the request. @default the seconds until the window resets */
  retryAfter?: number | ((req: Request, res: Response) => number | Promise<number>);
  /** The policy's name in draft-8 headers. @default "<limit>-in-<window>" ("100-in-15min") */
  identifier?: string | ((req: Request, res: Response) => string | Promise<string>);
  /** @default "rateLimit" */
  requestPropertyName?: string;
  /** `true`: a failing store lets requests through (ratekeeper's `failure: "open"`); `false`: 503 (`"closed"`). @default false */
  passOnStoreError?: boolean;
  /** express-rate-limit's validation switches; `trustProxy` and `xForwardedForHeader` map to ratekeeper's checks. */
  validate?: boolean | Record<string, boolean>;
  /** A ratekeeper store (`MemoryStore`, `RedisStore`). express-rate-limit's stores are not used. */
  store?: RateLimitOptions<Request>["store"];
  /**
   * IPv6 clients are keyed by this prefix; `false` keys each address on its own; a function is
   * asked per IPv6 request. @default 56
   */
  ipv6Subnet?: number | false | ((req: Request, res: Response) => number | Promise<number>);
  /** Where store errors and warnings are told when `onError` / `onWarning` are not given (`error(e, text)`, `warn(w)`). */
  logger?: { error(...args: unknown[]): void; warn(...args: unknown[]): void };
  /** ratekeeper's own options may be added (`trustedProxies`, `noAddress`, `onError`, `onDecision`, ...). */
  trustedProxies?: readonly string[];
  /** A request with no client address (a unix socket): `"deny"` refuses it (403), `"allow"` lets it through unlimited. @default "deny" */
  noAddress?: RateLimitOptions<Request>["noAddress"];
  onError?: RateLimitOptions<Request>["onError"];
  onDecision?: RateLimitOptions<Request>["onDecision"];
  onWarning?: RateLimitOptions<Request>["onWarning"];
  clock?: () => number;
}

/** What `req.rateLimit` holds, as in express-rate-limit. */
export interface RateLimitInfo {
  limit: number;
  used: number;
  remaining: number;
  resetTime: Date | undefined;
  key: string;
}

/** The options with their defaults, passed to `handler` as its fourth argument (as express-rate-limit does). */
export type ResolvedCompat = Required<
  Pick<ExpressRateLimitCompatOptions, "windowMs" | "message" | "statusCode" | "legacyHeaders" | "requestPropertyName">
> & {
  limit: NonNullable<ExpressRateLimitCompatOptions["limit"]>;
  standardHeaders: false | "draft-6" | "draft-7" | "draft-8";
  /** The rest, as express-rate-limit's handler sees them: the defaults are functions too. */
  identifier: NonNullable<ExpressRateLimitCompatOptions["identifier"]>;
  keyGenerator: NonNullable<ExpressRateLimitCompatOptions["keyGenerator"]>;
  skip: NonNullable<ExpressRateLimitCompatOptions["skip"]>;
  requestWasSuccessful: NonNullable<ExpressRateLimitCompatOptions["requestWasSuccessful"]>;
  handler: NonNullable<ExpressRateLimitCompatOptions["handler"]>;
  ipv6Subnet: NonNullable<ExpressRateLimitCompatOptions["ipv6Subnet"]>;
  skipFailedRequests: boolean;
  skipSuccessfulRequests: boolean;
  passOnStoreError: boolean;
  validate: NonNullable<ExpressRateLimitCompatOptions["validate"]>;
  logger: NonNullable<ExpressRateLimitCompatOptions["logger"]>;
  /** The store given, if any (the default one is ratekeeper's, made with the first limiter). */
  store: ExpressRateLimitCompatOptions["store"];
};

/** express-rate-limit's default logger: the console, the text first. */
export const consoleLogger: ResolvedCompat["logger"] = {
  error: (...args: unknown[]) => console.error(...args.reverse()),
  warn: (...args: unknown[]) => console.warn(...args.reverse()),
};

/** Options only express-rate-limit has: one of them (or no policy at all) selects this mapping. */
const ERL_ONLY = [
  "windowMs",
  "max",
  "message",
  "statusCode",
  "keyGenerator",
  "skipSuccessfulRequests",
  "skipFailedRequests",
  "requestWasSuccessful",
  "standardHeaders",
  "legacyHeaders",
  "identifier",
  "requestPropertyName",
  "passOnStoreError",
  "logger",
  "retryAfter",
];
const KNOWN = new Set([
  ...ERL_ONLY,
  // Also ratekeeper's own option (a header style), so it does not select this mapping; here it must be a boolean.
  "headers",
  "limit",
  "handler",
  "skip",
  "validate",
  "store",
  "ipv6Subnet",
  "trustedProxies",
  "noAddress",
  "onError",
  "onDecision",
  "onWarning",
  "clock",
]);

/** ratekeeper's own policy options: with them, the middleware is ratekeeper's, not this mapping. */
const OWN_POLICY = [
  "limiter",
  "limits",
  "concurrency",
  "namespace",
  "key",
  "keyPrefix",
  "cost",
  "allowList",
  "denyList",
  "countOnly",
  "isFailed",
  "shadow",
  "maxDelayMs",
  "failure",
  "forwardedHeader",
];

/** Whether options are express-rate-limit's: one of its own names, or a top-level `limit`, or no policy at all. */
export function isExpressRateLimitOptions(o: object): o is ExpressRateLimitCompatOptions {
  const r = o as Record<string, unknown>;
  if (ERL_ONLY.some((k) => k in r) || "limit" in r) return true;
  return r.limiter === undefined && r.limits === undefined && r.concurrency === undefined;
}

/** ratekeeper's validate option from express-rate-limit's. */
export function mapValidate(v: ExpressRateLimitCompatOptions["validate"]): RateLimitOptions<Request>["validate"] {
  if (v === undefined || typeof v === "boolean") return v;
  const def = v.default !== false;
  return {
    forwardedHeader: v.xForwardedForHeader ?? v.forwardedHeader ?? def,
    trustProxy: v.trustProxy ?? def,
    unsharedStore: v.unsharedStore ?? def,
  };
}

/** express-rate-limit's default identifier: `100-in-15min`. */
export function identifierOf(limit: number, windowMs: number): string {
  const s = windowMs / 1000;
  const m = s / 60;
  const h = m / 60;
  const d = h / 24;
  const duration = s < 60 ? `${s}sec` : m < 60 ? `${m}min` : h < 24 ? `${h}hr${h > 1 ? "s" : ""}` : `${d}day${d > 1 ? "s" : ""}`;
  return `${limit}-in-${duration}`;
}

/** What each of express-rate-limit's options must be, when given: a check and its wording. */
const TYPES: [string[], (v: unknown) => boolean, string][] = [
  [["legacyHeaders", "skipFailedRequests", "skipSuccessfulRequests", "passOnStoreError"], (v) => typeof v === "boolean", "true or false"],
  [["skip", "keyGenerator", "handler", "requestWasSuccessful"], (v) => typeof v === "function", "a function"],
  [["identifier"], (v) => typeof v === "string" || typeof v === "function", "a string or a function"],
  [["requestPropertyName"], (v) => typeof v === "string" && v.length > 0, "a non-empty string"],
  [["validate"], (v) => typeof v === "boolean" || isPlainObject(v), "true, false or an object"],
  [["statusCode"], (v) => typeof v === "number" && Number.isInteger(v) && v >= 100 && v <= 599, "a whole number from 100 to 599"],
];

/** express-rate-limit 8's validations, each a key of its `validate` option. */
const ERL_VALIDATIONS = [
  "default",
  "ip",
  "trustProxy",
  "xForwardedForHeader",
  "forwardedHeader",
  "positiveHits",
  "unsharedStore",
  "singleCount",
  "limit",
  "draftPolliHeaders",
  "onLimitReached",
  "headersDraftVersion",
  "headersResetTime",
  "knownOptions",
  "validationsConfig",
  "creationStack",
  "ipv6Subnet",
  "ipv6SubnetOrKeyGenerator",
  "keyGeneratorIpFallback",
  "windowMs",
];

/** Adds a problem for each option of the wrong type: Express would only fail on it at the first request, or never (`"false"` is true). */
function checkTypes(o: Record<string, unknown>, problems: string[]): void {
  // A misspelt validation would be silently ignored (express-rate-limit only logs it).
  if (typeof o.validate === "object" && o.validate !== null) {
    for (const [k, v] of Object.entries(o.validate)) {
      if (!ERL_VALIDATIONS.includes(k))
        problems.push(`validate.${k}: not one of express-rate-limit's validations (${ERL_VALIDATIONS.join(", ")})`);
      else if (typeof v !== "boolean") problems.push(`validate.${k}: must be true or false (got ${describeValue(v)})`);
    }
  }
  for (const [names, ok, wanted] of TYPES) {
    for (const name of names) {
      const v = o[name];
      if (v !== undefined && !ok(v)) problems.push(`${name}: must be ${wanted} (got ${describeValue(v)})`);
    }
  }
}

/** Checks what ratekeeper's options do not (the rest is checked by the core), each naming the option and what to write. */
export function check(o: ExpressRateLimitCompatOptions): void {
  const problems: string[] = [];
  const theirs = Object.keys(o).filter((k) => ERL_ONLY.includes(k) || k === "limit");
  for (const k of Object.keys(o)) {
    if (KNOWN.has(k)) continue;
    problems.push(
      OWN_POLICY.includes(k)
        ? `${k}: ratekeeper's own option, which cannot be mixed with express-rate-limit's (${theirs.join(", ")}); use one or the other (docs/migrating-from-express-rate-limit.md)`
        : `${k}: unknown option (express-rate-limit's or ratekeeper's)`,
    );
  }
  checkTypes(o as Record<string, unknown>, problems);
  const w = o.windowMs;
  if (w !== undefined && (typeof w !== "number" || !Number.isSafeInteger(w) || w < 1)) {
    problems.push(`windowMs: must be a whole number of milliseconds >= 1 (got ${String(w)})`);
  }
  const l = o.limit ?? o.max;
  if (l !== undefined && typeof l !== "function" && (typeof l !== "number" || !Number.isSafeInteger(l) || l < 0)) {
    problems.push(`limit: must be a whole number >= 0 (0 refuses every request) or a function returning one (got ${String(l)})`);
  }
  const v6 = o.ipv6Subnet;
  if (v6 !== undefined && v6 !== false && typeof v6 !== "function" && !isSubnet(v6)) {
    problems.push(`ipv6Subnet: must be a whole number from 1 to 128, false or a function (got ${String(v6)})`);
  }
  if (o.headers !== undefined && typeof o.headers !== "boolean") {
    problems.push(`headers: with express-rate-limit's options, legacyHeaders' old name: true or false (got ${describeValue(o.headers)})`);
  }
  const ra = o.retryAfter;
  if (ra !== undefined && typeof ra !== "function" && !isSeconds(ra)) {
    problems.push(`retryAfter: must be a whole number of seconds >= 0 or a function returning one (got ${describeValue(ra)})`);
  }
  const log = o.logger;
  if (log !== undefined && (typeof log !== "object" || log === null || typeof log.error !== "function" || typeof log.warn !== "function")) {
    problems.push("logger: must be an object with error() and warn() functions (console is one)");
  }
  const sh = o.standardHeaders;
  if (sh !== undefined && typeof sh !== "boolean" && sh !== "draft-6" && sh !== "draft-7" && sh !== "draft-8") {
    problems.push(`standardHeaders: must be true, false, "draft-6", "draft-7" or "draft-8" (got ${String(sh)})`);
  }
  if (o.skipFailedRequests === true && o.skipSuccessfulRequests === true) {
    problems.push(
      "skipFailedRequests and skipSuccessfulRequests: with both, no request would count; use skip: () => true to turn the limit off",
    );
  }
  if (o.store !== undefined && typeof (o.store as { increment?: unknown }).increment === "function") {
    problems.push(
      "store: an express-rate-limit store; give a ratekeeper store instead: new MemoryStore() from 'ratekeeper' or new RedisStore({ client }) from 'ratekeeper/redis'",
    );
  }
  if (problems.length > 0) throw new TypeError(`ratekeeper/express (express-rate-limit options): ${problems.join("; ")}`);
}

/** A value as an error message shows it: strings quoted, so "10" and 10 are told apart. */
export function describeValue(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : typeof v === "function" ? "a function" : (describeNonPlain(v) ?? String(v));
}

/** Whether `n` is a `Retry-After` value: whole seconds, not negative. */
export function isSeconds(n: unknown): n is number {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0;
}

/** Whether `n` is an IPv6 prefix length. */
export function isSubnet(n: unknown): n is number {
  return typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= 128;
}

/** The options with express-rate-limit's defaults: what its handler receives as `options`. */
export function resolveCompat(
  o: ExpressRateLimitCompatOptions,
  defaults: Pick<ResolvedCompat, "keyGenerator" | "handler">,
): ResolvedCompat {
  const config: ResolvedCompat = {
    windowMs: o.windowMs ?? 60_000,
    limit: o.limit ?? o.max ?? 5,
    message: o.message ?? "Too many requests, please try again later.",
    statusCode: o.statusCode ?? 429,
    legacyHeaders: o.legacyHeaders ?? o.headers ?? true,
    // `true` means draft-6, as in express-rate-limit.
    standardHeaders: o.standardHeaders === true ? "draft-6" : (o.standardHeaders ?? false),
    requestPropertyName: o.requestPropertyName ?? "rateLimit",
    identifier:
      o.identifier ??
      ((req) =>
        identifierOf((req as unknown as Record<string, { limit: number }>)[config.requestPropertyName]?.limit ?? 0, config.windowMs)),
    keyGenerator: o.keyGenerator ?? defaults.keyGenerator,
    skip: o.skip ?? (() => false),
    requestWasSuccessful: o.requestWasSuccessful ?? ((_req, res) => res.statusCode < 400),
    handler: o.handler ?? defaults.handler,
    ipv6Subnet: o.ipv6Subnet ?? 56,
    skipFailedRequests: o.skipFailedRequests ?? false,
    skipSuccessfulRequests: o.skipSuccessfulRequests ?? false,
    passOnStoreError: o.passOnStoreError ?? false,
    validate: o.validate ?? true,
    logger: o.logger ?? consoleLogger,
    store: o.store,
  };
  return config;
}
