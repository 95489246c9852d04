/**
 * The middleware's options: their documented types (the public contract every adapter shares)
 * and their resolution into what the limiter class uses, with one error naming every wrong field.
 * Slightly over our ~350-line guide because most of it is the options' documentation.
 */
import type { Decision } from "../core/decision.js";
import { collectIssues, describeValue, RateLimitConfigError, type ConfigIssue } from "../core/errors.js";
import type { LimitSpec } from "../core/options.js";
import { ConcurrencyLimiter, type ConcurrencyLimiterOptions } from "../concurrency.js";
import { RateLimiter, type RateLimiterOptions } from "../limiter.js";
import type { Store } from "../store.js";
import { compileCost, type CostOption, type CostRule } from "./cost.js";
import { HEADER_STYLES, HeaderWriter, type HeaderStyle } from "./headers.js";
import { AddressSet, ClientIpResolver, type ClientIpOptions } from "./ip.js";
import { KeyBuilder, type KeyPart, type RequestAccess } from "./keys.js";
import { resolveValidate, Validations, type RateLimitWarning, type ValidateOption } from "./validations.js";

/** What happened to one request, for `onDecision`. */
export interface RateLimitEvent<Req> {
  readonly req: Req;
  readonly key: string;
  readonly cost: number;
  readonly decision: Decision;
  /** `true` when the limit denied (in shadow mode the request went through anyway). */
  readonly limited: boolean;
  readonly shadow: boolean;
}

/**
 * Options shared by every adapter. Give the policy as a `limiter` (a {@link RateLimiter} or its
 * options: the same spec objects the decision service reads from YAML), or as `limits` with
 * `store` and `clock`.
 * @example
 * { limits: [{ algorithm: "sliding-window", limit: 100, window: "1m" }, { algorithm: "gcra", limit: 2, window: "1s" }], key: "ip" }
 */
export interface RateLimitOptions<Req> extends ClientIpOptions {
  /** The limiter, or options to build one. Optional when `concurrency` is given (then only requests in flight are limited). */
  limiter?: RateLimiter | RateLimiterOptions;
  /**
   * At most `limit` requests of a key in flight at once (over every process sharing its store):
   * a {@link ConcurrencyLimiter} or its options. A request admitted by the rate limit (if any)
   * takes a lease, released when the response finishes or the client goes away; a request that
   * finds every slot held gets a 429 (its rate-limit charge given back), with `Retry-After: 1`.
   * @example concurrency: { limit: 10, leaseMs: "2m", store }
   */
  concurrency?: ConcurrencyLimiter | ConcurrencyLimiterOptions;
  /** Several limits (all-or-nothing), when no `limiter` is given. */
  limits?: LimitSpec[];
  /** With `limits`: where state lives. @default new MemoryStore() */
  store?: Store;
  /** With `limits`: milliseconds since the epoch. */
  clock?: () => number;
  /** With `limits`: see {@link RateLimiterOptions}. */
  namespace?: string;
  /** What identifies a client. @default "ip" */
  key?: KeyPart<Req> | readonly KeyPart<Req>[];
  /** Prepended to every key, to give middlewares that share a limiter separate buckets. @default "" */
  keyPrefix?: string;
  /** Cost units per request. A table is matched on `"METHOD route"`, then `"route"`; unmatched requests cost 1. @default 1 */
  cost?: CostOption<Req>;
  /** Requests for which this returns true are not limited and get no headers. */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Client addresses or CIDR ranges never limited. */
  allowList?: readonly string[];
  /** Client addresses or CIDR ranges always refused with 403. */
  denyList?: readonly string[];
  /**
   * Count only some responses: after the response, requests of the other kind are refunded.
   * `"failed"`: only failed responses count (a login form); `"successful"`: only successful ones.
   */
  countOnly?: "failed" | "successful";
  /** What counts as failed for `countOnly` (a client gone before the response counts as failed). @default status >= 400 */
  isFailed?: (statusCode: number, req: Req) => boolean;
  /** Decide, send headers and report, but never block or delay. @default false */
  shadow?: boolean;
  /** Header styles to send, or `false` for none. @default "ietf" */
  headers?: HeaderStyle | readonly HeaderStyle[] | false;
  /** Shaping (leaky-bucket `mode: "shape"`): the longest a request is held; a longer wait is a 429. @default 30_000 */
  maxDelayMs?: number;
  /**
   * When the store rejects a decision (a `RedisStore` with `failure: "throw"`, or a store of your
   * own that fails): `"open"` lets the request through, `"closed"` answers 503. The same words as
   * the store's `failure` option. Timeouts belong to the store (`RedisStore`'s `timeoutMs`): a
   * RedisStore answers through its own failure policy (by default `"degraded"`) and never makes
   * the middleware wait past it.
   * @default "open"
   */
  failure?: "open" | "closed";
  /**
   * A request whose client address is unknown (no peer address: a server on a unix socket, a
   * socket already closed), when the key uses the address: `"deny"` refuses it with 403 and
   * tells `onError`; `"allow"` lets it through unlimited. Never one `"unknown"` key shared by
   * every such client, which one of them could exhaust for all. Behind a local proxy on a unix
   * socket, key on what the proxy passes (`key: (req) => ...`), or listen on TCP with
   * `trustedProxies`. Keys that do not use the address are not concerned.
   * @default "deny"
   */
  noAddress?: "deny" | "allow";
  /** Told about store failures and timeouts, and errors thrown by `key`, `cost`, `skip`. */
  onError?: (error: unknown, req: Req) => void;
  /** Told about every decision, allowed or not (metrics, logs, shadow-mode reports). */
  onDecision?: (event: RateLimitEvent<Req>) => void;
  /**
   * Checks on live requests about how the client address is found (a forwarding header from an
   * untrusted peer, a framework that trusts every proxy), each warning once with a code and what
   * to do (docs/middleware.md#validations). `false` turns them all off.
   * @default true
   * @example validate: { forwardedHeader: false } // clients reach this server directly
   */
  validate?: ValidateOption;
  /** Receives the validations' warnings instead of `console.warn`. */
  onWarning?: (warning: RateLimitWarning) => void;
}

/** {@link RateLimitOptions} checked and compiled: what the middleware core runs on. */
export interface ResolvedHttpOptions<Req> {
  /** Undefined when only `concurrency` limits. */
  readonly limiter: RateLimiter | undefined;
  readonly concurrency: ConcurrencyLimiter | undefined;
  readonly ips: ClientIpResolver;
  readonly keys: KeyBuilder<Req>;
  readonly cost: CostRule<Req>;
  readonly skip: ((req: Req) => boolean | Promise<boolean>) | undefined;
  readonly allow: AddressSet | undefined;
  readonly deny: AddressSet | undefined;
  readonly countOnly: "failed" | "successful" | undefined;
  readonly isFailed: (statusCode: number, req: Req) => boolean;
  readonly shadow: boolean;
  readonly headerWriter: HeaderWriter | undefined;
  readonly maxDelayMs: number;
  readonly storeDeny: boolean;
  /** Refuse requests without a client address when the key uses it (else let them through). */
  readonly noAddressDeny: boolean;
  readonly onError: ((error: unknown, req: Req) => void) | undefined;
  readonly onDecision: ((event: RateLimitEvent<Req>) => void) | undefined;
  /** The clock headers that show absolute times read. */
  readonly clock: () => number;
  readonly validations: Validations;
  /** `trustedProxies` was given (even empty: "trust nobody"), so the framework's own setting is not read. */
  readonly ownTrust: boolean;
}

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
export function resolveHttpOptions<Req>(options: RateLimitOptions<Req>, access: RequestAccess<Req>): ResolvedHttpOptions<Req> {
  if (typeof options !== "object" || options === null) {
    throw new RateLimitConfigError([{ path: "options", message: `must be an object (got ${describeValue(options)})` }]);
  }
  const issues: ConfigIssue[] = [];
  const o = options;
  for (const k of Object.keys(o)) {
    if (!KNOWN_OPTIONS.has(k) && !ADAPTER_OPTIONS.has(k)) {
      issues.push({
        path: k,
        message: RENAMED[k] ?? `unknown option; the options are ${[...KNOWN_OPTIONS].join(", ")} (docs/middleware.md#options)`,
      });
    }
  }
  const concurrency = resolveConcurrency(o.concurrency, issues);
  const limiter = o.concurrency !== undefined && o.limiter === undefined && o.limits === undefined ? undefined : resolveLimiter(o, issues);
  const ips = collectIssues(issues, () => new ClientIpResolver(o));
  const keys = new KeyBuilder(o.key, typeof o.keyPrefix === "string" ? o.keyPrefix : "", access, issues);
  if (o.keyPrefix !== undefined && typeof o.keyPrefix !== "string") {
    issues.push({ path: "keyPrefix", message: `must be a string (got ${describeValue(o.keyPrefix)})` });
  }
  const cost = compileCost(o.cost, issues);
  const checks = resolveValidate(o.validate, issues);
  for (const k of ["skip", "isFailed", "onError", "onDecision", "onWarning"] as const) {
    if (o[k] !== undefined && typeof o[k] !== "function")
      issues.push({ path: k, message: `must be a function (got ${describeValue(o[k])})` });
  }
  const allow = o.allowList === undefined ? undefined : collectIssues(issues, () => new AddressSet(o.allowList as string[], "allowList"));
  const deny = o.denyList === undefined ? undefined : collectIssues(issues, () => new AddressSet(o.denyList as string[], "denyList"));
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
  if (issues.length > 0 || (limiter === undefined && concurrency === undefined) || ips === undefined)
    throw new RateLimitConfigError(issues);

  const clock = isLimiter(o.limiter) || o.limiter === undefined ? o.clock : (o.limiter as { clock?: () => number }).clock;
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
    validations: new Validations(checks, o.onWarning),
    ownTrust: o.trustedProxies !== undefined,
  };
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
