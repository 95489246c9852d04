/**
 * Resolves the middleware's options (http/options.ts) into what the limiter class runs on:
 * every option checked, with one error naming every wrong field (and what to write instead for
 * the options of other limiters), the limiter built from its spec when not given.
 */
import { collectIssues, describeValue, RateLimitConfigError, type ConfigIssue } from "../core/errors.js";
import { MAX_TIMER_MS } from "../core/max-timer.js";
import type { LimitSpec } from "../core/options.js";
import { ConcurrencyLimiter, type ConcurrencyLimiterOptions } from "../concurrency.js";
import { RateLimiter, type RateLimiterOptions } from "../limiter.js";
import { compileCost } from "./cost.js";
import { HEADER_STYLES, HeaderWriter, type HeaderStyle } from "./headers.js";
import { AddressSet, ClientIpResolver } from "./ip.js";
import { KeyBuilder, type RequestAccess } from "./keys.js";
import type { RateLimitOptions, ResolvedHttpOptions } from "./options.js";
import { claimDefaultNamespaces, COUNTER_OWNER } from "./counter-claims.js";
import { resolveValidate, trustValidations } from "./validations.js";
import { isPlainObject } from "../core/plain-object.js";

const KNOWN_OPTIONS = new Set([
  "limiter",
  "concurrency",
  "limits",
  "store",
  "clock",
  "namespace",
  "key",
  "keyPrefix",
  "cost",
  "skip",
  "allowList",
  "denyList",
  "countOnly",
  "isFailed",
  "shadow",
  "headers",
  "maxDelayMs",
  "failure",
  "noAddress",
  "onError",
  "onDecision",
  "trustedProxies",
  "forwardedHeader",
  "ipv6Subnet",
  "validate",
  "onWarning",
]);

/**
 * Options that were renamed or moved, and options of other limiters (express-rate-limit,
 * @fastify/rate-limit, rate-limiter-flexible) with what to write instead. The Express adapter
 * accepts express-rate-limit's options as they are (`ratekeeper/express`'s `compat.ts`).
 */
const RENAMED: Readonly<Record<string, string>> = {
  onStoreError: 'renamed: use failure: "open" (was "allow") or "closed" (was "deny")',
  storeTimeoutMs: "moved to the store: new RedisStore({ client, timeoutMs }) (the middleware no longer keeps a timer of its own)",
  trustProxy:
    "not an option here: name the proxies in front of the app with trustedProxies: [addresses or CIDR ranges] " +
    '(e.g. ["10.0.0.0/8"] or ["loopback"]); Express\'s app.set("trust proxy", ...) and Fastify({ trustProxy }) are read from the app',
  windowMs:
    'express-rate-limit\'s option: ratekeeper/express accepts it; elsewhere write limits: [{ algorithm: "fixed-window", limit, window: "15m" }] (docs/migrating-from-express-rate-limit.md)',
  max: 'express-rate-limit\'s option: write limits: [{ algorithm: "fixed-window", limit: <max>, window: "1m" }]',
  timeWindow:
    '@fastify/rate-limit\'s option: write limits: [{ algorithm: "fixed-window", limit: <max>, window: "1m" }] (docs/migrating-from-fastify-rate-limit.md)',
  points:
    'rate-limiter-flexible\'s option: write limits: [{ algorithm: "fixed-window", limit: <points>, window: "<duration>s" }] (docs/migrating-from-rate-limiter-flexible.md)',
  duration: 'rate-limiter-flexible\'s option: write window: "<duration>s" inside limits: [{ algorithm, limit, window }]',
  keyGenerator: "write key: (req) => string (a function part of the key; it may return a promise)",
  allow: "write allowList: [addresses or CIDR ranges] (never limited), or skip: (req) => boolean",
  standardHeaders: 'write headers: "draft-6" | "draft-7" | "ietf" (the default), or false',
  legacyHeaders: 'write headers: ["x-ratelimit", "ietf"] to add X-RateLimit-* headers',
  skipFailedRequests: 'write countOnly: "successful" (failed responses are given back)',
  skipSuccessfulRequests: 'write countOnly: "failed" (successful responses are given back)',
  limit:
    'belongs to a limit: limits: [{ algorithm: "sliding-window", limit: 100, window: "1m" }] (ratekeeper/express also takes express-rate-limit\'s windowMs + limit)',
  window: 'belongs to a limit: limits: [{ algorithm: "sliding-window", limit: 100, window: "1m" }]',
  algorithm: 'belongs to a limit: limits: [{ algorithm: "sliding-window", limit: 100, window: "1m" }]',
};

/** Options an adapter adds on top of {@link RateLimitOptions} (its custom handler); not validated here. */
const ADAPTER_OPTIONS = new Set(["handler", "getRemoteAddress"]);

/**
 * A RateLimiter, recognised by shape rather than `instanceof`, so a limiter built by another copy
 * of the package (a bundler duplicate, the dist next to the sources) still counts.
 */
function isLimiter(v: unknown): v is RateLimiter {
  if (v instanceof RateLimiter) return true;
  const l = v as Partial<RateLimiter> | null;
  return (
    typeof l === "object" && l !== null && typeof l.consume === "function" && typeof l.refund === "function" && Array.isArray(l.limits)
  );
}

/**
 * Checks and compiles the middleware's options.
 * @throws RateLimitConfigError listing every bad option with its name
 */
export function resolveHttpOptions<Req>(
  options: RateLimitOptions<Req>,
  access: RequestAccess<Req>,
  owner: object,
): ResolvedHttpOptions<Req> {
  if (!isPlainObject(options)) {
    throw new RateLimitConfigError([{ path: "options", message: `must be an object (got ${describeValue(options)})` }]);
  }
  const issues: ConfigIssue[] = [];
  const o = options;
  checkNames(o, issues);
  const concurrency = resolveConcurrency(o.concurrency, issues);
  const limiter = o.concurrency !== undefined && o.limiter === undefined && o.limits === undefined ? undefined : resolveLimiter(o, issues);
  const ips = collectIssues(issues, () => new ClientIpResolver(o));
  const keys = new KeyBuilder(o.key, typeof o.keyPrefix === "string" ? o.keyPrefix : "", access, issues);
  if (o.keyPrefix !== undefined && typeof o.keyPrefix !== "string") {
    issues.push({ path: "keyPrefix", message: `must be a string (got ${describeValue(o.keyPrefix)})` });
  }
  const cost = compileCost(o.cost, issues, typeof limiter?.maxCost === "number" ? limiter.maxCost : undefined);
  const checks = resolveValidate(o.validate, issues);
  checkCallbacks(o, issues);
  const allow = o.allowList === undefined ? undefined : collectIssues(issues, () => new AddressSet(o.allowList as string[], "allowList"));
  const deny = o.denyList === undefined ? undefined : collectIssues(issues, () => new AddressSet(o.denyList as string[], "denyList"));
  const { styles, maxDelayMs } = checkBehaviour(o, issues);
  if (issues.length > 0 || (limiter === undefined && concurrency === undefined) || ips === undefined)
    throw new RateLimitConfigError(issues);

  const validations = trustValidations(checks, o.onWarning, ips, o.trustedProxies);
  const claimant = (options as { [COUNTER_OWNER]?: object })[COUNTER_OWNER] ?? owner;
  if (checks.unsharedStore) claimDefaultNamespaces(o, limiter, concurrency, claimant, validations);
  // The clock of the limiter's decisions, given built or as options: headers with absolute times add their durations to it.
  const clock = o.limiter === undefined ? o.clock : (o.limiter as { clock?: () => number }).clock;
  return {
    limiter,
    concurrency,
    ips,
    keys,
    cost,
    skip: o.skip,
    allow,
    deny,
    countOnly: o.countOnly,
    isFailed: o.isFailed ?? ((s: number) => s >= 400),
    shadow: o.shadow === true,
    headerWriter: styles.length > 0 && limiter !== undefined ? new HeaderWriter(limiter.limits, styles) : undefined,
    maxDelayMs,
    storeDeny: o.failure === "closed",
    noAddressDeny: o.noAddress !== "allow",
    onError: o.onError,
    onDecision: o.onDecision,
    clock: clock ?? Date.now,
    validations,
    ownTrust: o.trustedProxies !== undefined,
  };
}

/** Every option name not ours, with what to write instead when it is another limiter's or an old one. */
function checkNames(o: object, issues: ConfigIssue[]): void {
  for (const k of Object.keys(o)) {
    if (!KNOWN_OPTIONS.has(k) && !ADAPTER_OPTIONS.has(k)) {
      issues.push({
        path: k,
        message: RENAMED[k] ?? `unknown option; the options are ${[...KNOWN_OPTIONS].join(", ")} (docs/middleware.md#options)`,
      });
    }
  }
}

/** The options that must be functions. */
function checkCallbacks<Req>(o: RateLimitOptions<Req>, issues: ConfigIssue[]): void {
  for (const k of ["skip", "isFailed", "onError", "onDecision", "onWarning"] as const) {
    if (o[k] !== undefined && typeof o[k] !== "function")
      issues.push({ path: k, message: `must be a function (got ${describeValue(o[k])})` });
  }
}

/**
 * The options that say how the middleware behaves once it has decided (countOnly, shadow,
 * headers, maxDelayMs, failure, noAddress): checked, with the header styles and the delay resolved.
 */
function checkBehaviour<Req>(o: RateLimitOptions<Req>, issues: ConfigIssue[]): { styles: HeaderStyle[]; maxDelayMs: number } {
  if (o.countOnly !== undefined && o.countOnly !== "failed" && o.countOnly !== "successful") {
    issues.push({ path: "countOnly", message: `must be "failed" or "successful" (got ${describeValue(o.countOnly)})` });
  }
  if (o.shadow !== undefined && typeof o.shadow !== "boolean")
    issues.push({ path: "shadow", message: `must be true or false (got ${describeValue(o.shadow)})` });
  const styles = headerStyles(o.headers, issues);
  const maxDelayMs = o.maxDelayMs ?? 30_000;
  if (typeof maxDelayMs !== "number" || !Number.isSafeInteger(maxDelayMs) || maxDelayMs < 0) {
    issues.push({ path: "maxDelayMs", message: `must be a whole number of milliseconds >= 0 (got ${describeValue(o.maxDelayMs)})` });
  }
  if (o.failure !== undefined && o.failure !== "open" && o.failure !== "closed") {
    issues.push({
      path: "failure",
      message: `must be "open" (let the request through) or "closed" (503) (got ${describeValue(o.failure)})`,
    });
  }
  if (o.noAddress !== undefined && o.noAddress !== "deny" && o.noAddress !== "allow") {
    issues.push({ path: "noAddress", message: `must be "deny" or "allow" (got ${describeValue(o.noAddress)})` });
  }
  // A hold is one timer, which holds at most 2^31 - 1 ms (about 24.8 days; node runs a longer
  // one after 1 ms): a longer wait is refused like any queue longer than maxDelayMs.
  return { styles, maxDelayMs: Math.min(maxDelayMs, MAX_TIMER_MS) };
}

/** The policy: a limiter given, built from its options, or built from `limits` + `store` + `clock`. */
function resolveLimiter<Req>(o: RateLimitOptions<Req>, issues: ConfigIssue[]): RateLimiter | undefined {
  if (o.limiter !== undefined && o.limits !== undefined) {
    issues.push({ path: "limits", message: "give either limiter or limits, not both" });
    return undefined;
  }
  if (isLimiter(o.limiter)) {
    for (const k of ["store", "clock", "namespace"] as const) {
      if (o[k] !== undefined) issues.push({ path: k, message: "belongs to the limiter you passed; set it there" });
    }
    return o.limiter;
  }
  if (o.limiter !== undefined) return collectIssues(issues, () => new RateLimiter(o.limiter as RateLimiterOptions));
  if (o.limits !== undefined) {
    return collectIssues(
      issues,
      () => new RateLimiter({ limits: o.limits as LimitSpec[], store: o.store, clock: o.clock, namespace: o.namespace }),
    );
  }
  issues.push({ path: "limiter", message: "required: a RateLimiter, its options, or limits: [...] (or only concurrency: {...})" });
  return undefined;
}

/** The `concurrency` option: a ConcurrencyLimiter (recognised by shape), or its options. */
function resolveConcurrency(
  c: ConcurrencyLimiter | ConcurrencyLimiterOptions | undefined,
  issues: ConfigIssue[],
): ConcurrencyLimiter | undefined {
  if (c === undefined) return undefined;
  // One built by another copy of the package (a bundler duplicate) still counts.
  if (
    c instanceof ConcurrencyLimiter ||
    (typeof c === "object" && c !== null && typeof (c as Partial<ConcurrencyLimiter>).acquire === "function")
  ) {
    return c as ConcurrencyLimiter;
  }
  return collectIssues(
    issues,
    () => new ConcurrencyLimiter(c),
    (i) => ({ path: `concurrency.${i.path}`, message: i.message }),
  );
}

/** The `headers` option as a list of styles (`false` -> none). */
function headerStyles(headers: RateLimitOptions<unknown>["headers"], issues: ConfigIssue[]): HeaderStyle[] {
  if (headers === undefined) return ["ietf"];
  if (headers === false) return [];
  const styles = Array.isArray(headers) ? [...(headers as HeaderStyle[])] : [headers as HeaderStyle];
  for (const s of styles) {
    if (!HEADER_STYLES.includes(s))
      issues.push({
        path: "headers",
        message: `must be false or one or more of ${HEADER_STYLES.map((x) => `"${x}"`).join(", ")} (got ${describeValue(s)})`,
      });
  }
  // The three drafts all use RateLimit-Policy (and two use RateLimit) with different syntaxes: one at a time.
  if (styles.filter((s) => s !== "x-ratelimit").length > 1) {
    issues.push({
      path: "headers",
      message: `may combine "x-ratelimit" with one of "ietf", "draft-7", "draft-6", not several drafts (got ${describeValue(headers)})`,
    });
  }
  return styles;
}
