import type { Decision } from "../core/decision.js";
import { describe } from "../core/duration.js";
import { RateLimitConfigError, type ConfigIssue } from "../core/errors.js";
import type { LimitSpec } from "../core/options.js";
import { RateLimiter, type RateLimiterOptions } from "../limiter.js";
import type { Store } from "../store.js";
import { HEADER_STYLES, HeaderWriter, toSeconds, type HeaderStyle } from "./headers.js";
import { AddressSet, ClientIpResolver, type ClientIpOptions } from "./ip.js";
import { PROBLEM_CONTENT_TYPE, forbidden, tooManyRequests, unavailable, type ProblemDetails } from "./problem.js";

/**
 * How an adapter reads its framework's request. Defined once per framework, so the core never
 * allocates a wrapper per request.
 */
export interface RequestAccess<Req> {
  method(req: Req): string;
  /** The path without the query string. */
  path(req: Req): string;
  /** The matched route pattern (`/users/:id`) when the framework knows it before the handler runs. */
  route(req: Req): string | undefined;
  /** The socket peer's address. */
  remoteAddress(req: Req): string | undefined;
  /** A header by lower-case name; several lines joined by ", ". */
  header(req: Req, name: string): string | undefined;
}

/** What a key function is told about the request, besides the request itself. */
export interface KeyInfo {
  /** The client's address (resolved through trusted proxies; IPv6 grouped to its prefix), or "unknown". */
  readonly ip: string;
  readonly method: string;
  readonly path: string;
  /** The route pattern when known, else the path. */
  readonly route: string;
}

/**
 * One part of a rate-limit key: the client IP, the method, the route pattern, the path, a header
 * (an API key; falls back to the IP when absent so anonymous clients are not one shared bucket),
 * or a function (a user id). Several parts are joined, e.g. `["ip", "route"]`.
 */
export type KeyPart<Req> =
  "ip" | "method" | "route" | "path" | { header: string } | ((req: Req, info: KeyInfo) => string | undefined | Promise<string | undefined>);

/** Cost of a request: a number, a table (`{ "GET /user": 1, "POST /user": 2 }`, seed 001), or a function. */
export type CostOption<Req> = number | Readonly<Record<string, number>> | ((req: Req, info: KeyInfo) => number);

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
  /** The limiter, or options to build one. */
  limiter?: RateLimiter | RateLimiterOptions;
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
  isFailed?: (statusCode: number) => boolean;
  /** Decide, send headers and report, but never block or delay. @default false */
  shadow?: boolean;
  /** Header styles to send, or `false` for none. @default "ietf" */
  headers?: HeaderStyle | readonly HeaderStyle[] | false;
  /** Shaping (leaky-bucket `mode: "shape"`): the longest a request is held; a longer wait is a 429. @default 30_000 */
  maxDelayMs?: number;
  /** When the store fails or times out: let the request through, or answer 503. @default "allow" */
  onStoreError?: "allow" | "deny";
  /** The longest to wait for a store that is not in-process. @default 2_000 */
  storeTimeoutMs?: number;
  /** Told about store failures and timeouts, and errors thrown by `key`, `cost`, `skip`. */
  onError?: (error: unknown, req: Req) => void;
  /** Told about every decision, allowed or not (metrics, logs, shadow-mode reports). */
  onDecision?: (event: RateLimitEvent<Req>) => void;
}

/**
 * The verdict on one request, for an adapter to apply: set `headers`; if `pass` is false answer
 * `status` with `body`; otherwise wait `delayMs` (through {@link HttpRateLimiter.hold}) and pass
 * on, then call {@link HttpRateLimiter.settle} when the response is done.
 */
export interface RateLimitResult {
  readonly pass: boolean;
  /** 429, 403 or 503 when `pass` is false; 0 otherwise. */
  readonly status: number;
  readonly headers: [string, string][];
  /** The problem details to send when `pass` is false (JSON in `body`). */
  readonly problem: ProblemDetails | undefined;
  readonly body: string | undefined;
  readonly contentType: string;
  /** How long to hold the request before passing it on (shaping). */
  readonly delayMs: number;
  readonly decision: Decision | undefined;
  readonly key: string | undefined;
  readonly cost: number;
  /** Whether {@link HttpRateLimiter.settle} has work to do (a `countOnly` refund). */
  readonly settles: boolean;
}

const PASS: RateLimitResult = Object.freeze({
  pass: true,
  status: 0,
  headers: [],
  problem: undefined,
  body: undefined,
  contentType: PROBLEM_CONTENT_TYPE,
  delayMs: 0,
  decision: undefined,
  key: undefined,
  cost: 0,
  settles: false,
});

const KNOWN_OPTIONS = new Set([
  "limiter",
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
  "onStoreError",
  "storeTimeoutMs",
  "onError",
  "onDecision",
  "trustedProxies",
  "forwardedHeader",
  "ipv6Subnet",
]);

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

type CompiledPart<Req> = (req: Req, info: KeyInfo) => string | undefined | Promise<string | undefined>;

/**
 * The framework-neutral middleware: resolves the key and cost of a request, asks the limiter,
 * and says what to send. Adapters (`ratekeeper/express`, `/fastify`, `/hono`, `/node`) apply it.
 * @example
 * const rl = new HttpRateLimiter({ limiter: { algorithm: "gcra", limit: 10, window: "1s" } }, access);
 * const r = await rl.check(req);
 */
export class HttpRateLimiter<Req> {
  readonly limiter: RateLimiter;
  private readonly access: RequestAccess<Req>;
  private readonly ips: ClientIpResolver;
  private readonly parts: CompiledPart<Req>[];
  private readonly simpleIpKey: boolean;
  private readonly keyPrefix: string;
  private readonly costFn: ((req: Req, info: KeyInfo) => number) | undefined;
  private readonly costTable: Readonly<Record<string, number>> | undefined;
  private readonly fixedCost: number;
  private readonly skip: ((req: Req) => boolean | Promise<boolean>) | undefined;
  private readonly allow: AddressSet | undefined;
  private readonly deny: AddressSet | undefined;
  private readonly countOnly: "failed" | "successful" | undefined;
  private readonly isFailed: (statusCode: number) => boolean;
  readonly shadow: boolean;
  private readonly headerWriter: HeaderWriter | undefined;
  readonly maxDelayMs: number;
  private readonly storeDeny: boolean;
  private readonly timeoutMs: number;
  private readonly onError: ((error: unknown, req: Req) => void) | undefined;
  private readonly onDecision: ((event: RateLimitEvent<Req>) => void) | undefined;
  private readonly clock: () => number;
  /** Whether {@link HttpRateLimiter.check} can answer without awaiting user callbacks. */
  private readonly syncPath: boolean;

  /**
   * @param options see {@link RateLimitOptions}
   * @param access how to read the framework's request
   * @throws RateLimitConfigError listing every bad option with its name
   */
  constructor(options: RateLimitOptions<Req>, access: RequestAccess<Req>) {
    if (typeof options !== "object" || options === null) {
      throw new RateLimitConfigError([{ path: "options", message: `must be an object (got ${describe(options)})` }]);
    }
    const issues: ConfigIssue[] = [];
    const o = options;
    for (const k of Object.keys(o)) {
      if (!KNOWN_OPTIONS.has(k) && !ADAPTER_OPTIONS.has(k)) issues.push({ path: k, message: "unknown option" });
    }
    const guard = <T>(fn: () => T): T | undefined => {
      try {
        return fn();
      } catch (e) {
        if (!(e instanceof RateLimitConfigError)) throw e;
        issues.push(...e.issues);
        return undefined;
      }
    };

    // The policy.
    let limiter: RateLimiter | undefined;
    if (o.limiter !== undefined && o.limits !== undefined) {
      issues.push({ path: "limits", message: "give either limiter or limits, not both" });
    } else if (isLimiter(o.limiter)) {
      for (const k of ["store", "clock", "namespace"] as const) {
        if (o[k] !== undefined) issues.push({ path: k, message: "belongs to the limiter you passed; set it there" });
      }
      limiter = o.limiter;
    } else if (o.limiter !== undefined) {
      limiter = guard(() => new RateLimiter(o.limiter as RateLimiterOptions));
    } else if (o.limits !== undefined) {
      limiter = guard(() => new RateLimiter({ limits: o.limits as LimitSpec[], store: o.store, clock: o.clock, namespace: o.namespace }));
    } else {
      issues.push({ path: "limiter", message: "required: a RateLimiter, its options, or limits: [...]" });
    }

    const ips = guard(() => new ClientIpResolver(o));

    // The key.
    const rawParts =
      o.key === undefined ? ["ip" as const] : Array.isArray(o.key) ? (o.key as readonly KeyPart<Req>[]) : [o.key as KeyPart<Req>];
    if (rawParts.length === 0) issues.push({ path: "key", message: "must name at least one part" });
    const parts: CompiledPart<Req>[] = [];
    rawParts.forEach((p, i) => {
      const at = Array.isArray(o.key) ? `key[${i}]` : "key";
      const c = this.compilePart(p, at, issues);
      if (c) parts.push(c);
    });
    if (o.keyPrefix !== undefined && typeof o.keyPrefix !== "string") {
      issues.push({ path: "keyPrefix", message: `must be a string (got ${describe(o.keyPrefix)})` });
    }

    // The cost.
    let fixedCost = 1;
    let costFn: ((req: Req, info: KeyInfo) => number) | undefined;
    let costTable: Record<string, number> | undefined;
    if (typeof o.cost === "number") {
      if (!Number.isSafeInteger(o.cost) || o.cost <= 0)
        issues.push({ path: "cost", message: `must be a positive whole number (got ${describe(o.cost)})` });
      fixedCost = o.cost;
    } else if (typeof o.cost === "function") costFn = o.cost;
    else if (typeof o.cost === "object" && o.cost !== null) {
      costTable = {};
      for (const [k, v] of Object.entries(o.cost)) {
        if (typeof v !== "number" || !Number.isSafeInteger(v) || v <= 0)
          issues.push({ path: `cost["${k}"]`, message: `must be a positive whole number (got ${describe(v)})` });
        costTable[
          k
            .trim()
            .replace(/\s+/g, " ")
            .replace(/^[a-z]+ /, (m) => m.toUpperCase())
        ] = v;
      }
    } else if (o.cost !== undefined)
      issues.push({ path: "cost", message: `must be a number, a table or a function (got ${describe(o.cost)})` });

    for (const k of ["skip", "isFailed", "onError", "onDecision"] as const) {
      if (o[k] !== undefined && typeof o[k] !== "function") issues.push({ path: k, message: `must be a function (got ${describe(o[k])})` });
    }
    const allow = o.allowList === undefined ? undefined : guard(() => new AddressSet(o.allowList as string[], "allowList"));
    const deny = o.denyList === undefined ? undefined : guard(() => new AddressSet(o.denyList as string[], "denyList"));
    if (o.countOnly !== undefined && o.countOnly !== "failed" && o.countOnly !== "successful") {
      issues.push({ path: "countOnly", message: `must be "failed" or "successful" (got ${describe(o.countOnly)})` });
    }
    if (o.shadow !== undefined && typeof o.shadow !== "boolean")
      issues.push({ path: "shadow", message: `must be true or false (got ${describe(o.shadow)})` });
    let styles: HeaderStyle[] = [];
    if (o.headers === undefined) styles = ["ietf"];
    else if (o.headers !== false) {
      styles = Array.isArray(o.headers) ? [...(o.headers as HeaderStyle[])] : [o.headers as HeaderStyle];
      for (const s of styles) {
        if (!HEADER_STYLES.includes(s))
          issues.push({
            path: "headers",
            message: `must be false or one or more of ${HEADER_STYLES.map((x) => `"${x}"`).join(", ")} (got ${describe(s)})`,
          });
      }
      // The three drafts all use RateLimit-Policy (and two use RateLimit) with different syntaxes: one at a time.
      if (styles.filter((s) => s !== "x-ratelimit").length > 1) {
        issues.push({
          path: "headers",
          message: `may combine "x-ratelimit" with one of "ietf", "draft-7", "draft-6", not several drafts (got ${describe(o.headers)})`,
        });
      }
    }
    const maxDelayMs = o.maxDelayMs ?? 30_000;
    if (typeof maxDelayMs !== "number" || !Number.isSafeInteger(maxDelayMs) || maxDelayMs < 0) {
      issues.push({ path: "maxDelayMs", message: `must be a whole number of milliseconds >= 0 (got ${describe(o.maxDelayMs)})` });
    }
    if (o.onStoreError !== undefined && o.onStoreError !== "allow" && o.onStoreError !== "deny") {
      issues.push({ path: "onStoreError", message: `must be "allow" or "deny" (got ${describe(o.onStoreError)})` });
    }
    const timeoutMs = o.storeTimeoutMs ?? 2_000;
    if (typeof timeoutMs !== "number" || !Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
      issues.push({
        path: "storeTimeoutMs",
        message: `must be a positive whole number of milliseconds (got ${describe(o.storeTimeoutMs)})`,
      });
    }
    if (issues.length > 0 || limiter === undefined || ips === undefined) throw new RateLimitConfigError(issues);

    this.limiter = limiter;
    this.access = access;
    this.ips = ips;
    this.parts = parts;
    this.simpleIpKey = rawParts.length === 1 && rawParts[0] === "ip";
    this.keyPrefix = o.keyPrefix ?? "";
    this.fixedCost = fixedCost;
    this.costFn = costFn;
    this.costTable = costTable;
    this.skip = o.skip;
    this.allow = allow;
    this.deny = deny;
    this.countOnly = o.countOnly;
    this.isFailed = o.isFailed ?? ((s: number) => s >= 400);
    this.shadow = o.shadow === true;
    this.headerWriter = styles.length > 0 ? new HeaderWriter(limiter.limits, styles) : undefined;
    this.maxDelayMs = maxDelayMs;
    this.storeDeny = o.onStoreError === "deny";
    this.timeoutMs = timeoutMs;
    this.syncPath = o.skip === undefined && !rawParts.some((p) => typeof p === "function");
    this.onError = o.onError;
    this.onDecision = o.onDecision;
    const clock = isLimiter(o.limiter) || o.limiter === undefined ? o.clock : (o.limiter as { clock?: () => number }).clock;
    this.clock = clock ?? Date.now;
  }

  private compilePart(p: KeyPart<Req>, at: string, issues: ConfigIssue[]): CompiledPart<Req> | undefined {
    if (typeof p === "function") return p;
    switch (p) {
      case "ip":
        return (_req, info) => info.ip;
      case "method":
        return (_req, info) => info.method;
      case "route":
        return (_req, info) => info.route;
      case "path":
        return (_req, info) => info.path;
      default:
        break;
    }
    if (typeof p === "object" && p !== null && typeof (p as { header?: unknown }).header === "string" && p.header.length > 0) {
      const name = p.header.toLowerCase();
      return (req, info) => {
        const v = this.access.header(req, name);
        return v === undefined || v.length === 0 ? `ip=${info.ip}` : `${name}=${v}`;
      };
    }
    issues.push({ path: at, message: `must be "ip", "method", "route", "path", { header: "<name>" } or a function (got ${describe(p)})` });
    return undefined;
  }

  /** The client's address as the limiter sees it: resolved through trusted proxies, IPv6 grouped. */
  clientIp(req: Req): string | undefined {
    const ip = this.resolveIp(req);
    return ip === undefined ? undefined : this.ips.group(ip);
  }

  private resolveIp(req: Req): string | undefined {
    const peer = this.access.remoteAddress(req);
    return this.ips.resolve(peer, this.ips.trustsProxies ? this.access.header(req, this.ips.header) : undefined);
  }

  /**
   * Decides one request. Never throws or rejects: errors from the store or from user callbacks
   * go to `onError` and the request is let through (or refused with 503 when
   * `onStoreError: "deny"`). Answers synchronously when it can (no `skip`, no key function, a
   * store that answers synchronously: the memory store), so adapters pass the request on
   * without a microtask; otherwise returns a promise.
   */
  check(req: Req): RateLimitResult | Promise<RateLimitResult> {
    if (!this.syncPath) return this.checkAsync(req);
    let key: string;
    let cost: number;
    let d: Decision | Promise<Decision>;
    try {
      const ip = this.gate(req);
      if (typeof ip !== "string") return ip;
      let info: KeyInfo | undefined;
      if (this.simpleIpKey) key = this.keyPrefix + ip;
      else {
        info = this.info(req, ip);
        key = this.keyPrefix;
        // Only built-in parts on this path: they answer synchronously.
        for (let i = 0; i < this.parts.length; i++) key += (i === 0 ? "" : "|") + this.part(i, req, info);
      }
      cost = this.costOf(req, ip, info);
      d = this.consume(key, cost);
    } catch (e) {
      return this.failed(e, req);
    }
    if (d instanceof Promise) {
      return d.then(
        (decision) => this.verdict(req, key, cost, decision),
        (e: unknown) => this.failed(e, req),
      );
    }
    return this.verdict(req, key, cost, d);
  }

  /**
   * The client's address as keys use it (IPv6 grouped by prefix; `"unknown"` when there is none),
   * or the answer itself when the allow list (`PASS`) or the deny list (403) decides.
   */
  private gate(req: Req): string | RateLimitResult {
    const rawIp = this.resolveIp(req);
    if (rawIp === undefined) return "unknown";
    if (this.allow !== undefined && this.allow.has(rawIp)) return PASS;
    if (this.deny !== undefined && this.deny.has(rawIp)) return this.refuse(forbidden(), []);
    return this.ips.group(rawIp);
  }

  /** The general path: awaits `skip` and key functions. */
  private async checkAsync(req: Req): Promise<RateLimitResult> {
    let key: string;
    let cost: number;
    let decision: Decision;
    try {
      if (this.skip !== undefined && (await this.skip(req))) return PASS;
      const ip = this.gate(req);
      if (typeof ip !== "string") return ip;
      let info: KeyInfo | undefined;
      if (this.simpleIpKey) key = this.keyPrefix + ip;
      else {
        info = this.info(req, ip);
        key = this.keyPrefix;
        for (let i = 0; i < this.parts.length; i++) {
          let v = (this.parts[i] as CompiledPart<Req>)(req, info);
          if (typeof v === "object") v = await v;
          key += (i === 0 ? "" : "|") + (v === undefined || v === "" ? "-" : v);
        }
      }
      cost = this.costOf(req, ip, info);
      decision = await this.consume(key, cost);
    } catch (e) {
      return this.failed(e, req);
    }
    return this.verdict(req, key, cost, decision);
  }

  /** A built-in key part's text (the sync path never has functions). */
  private part(i: number, req: Req, info: KeyInfo): string {
    const v = (this.parts[i] as CompiledPart<Req>)(req, info) as string | undefined;
    return v === undefined || v === "" ? "-" : v;
  }

  private costOf(req: Req, ip: string, info: KeyInfo | undefined): number {
    if (this.costFn !== undefined) return this.costFn(req, info ?? this.info(req, ip));
    if (this.costTable !== undefined) {
      const i = info ?? this.info(req, ip);
      return this.costTable[`${i.method} ${i.route}`] ?? this.costTable[i.route] ?? 1;
    }
    return this.fixedCost;
  }

  private failed(e: unknown, req: Req): RateLimitResult {
    this.report(e, req);
    return this.storeDeny ? this.refuse(unavailable(), []) : PASS;
  }

  private info(req: Req, ip: string): KeyInfo {
    const path = this.access.path(req);
    return { ip, method: this.access.method(req), path, route: this.access.route(req) ?? path };
  }

  /** Asks the limiter; a promised answer gets the `storeTimeoutMs` deadline (a synchronous one cannot hang). */
  private consume(key: string, cost: number): Decision | Promise<Decision> {
    const l = this.limiter;
    // consumeNow may be missing on a limiter from an older copy of the package.
    const p = typeof l.consumeNow === "function" ? l.consumeNow(key, cost) : l.consume(key, cost);
    if (!(p instanceof Promise)) return p;
    return new Promise<Decision>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`rate limit store did not answer within ${this.timeoutMs} ms`)), this.timeoutMs);
      t.unref?.();
      p.then(
        (d) => {
          clearTimeout(t);
          resolve(d);
        },
        (e: unknown) => {
          clearTimeout(t);
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
  }

  private verdict(req: Req, key: string, cost: number, decision: Decision): RateLimitResult {
    const headers: [string, string][] = [];
    let d = decision;
    if (d.allowed && d.delayMs > this.maxDelayMs && !this.shadow) {
      // Shaping with a queue longer than the caller will wait: give the place back and refuse.
      // The wait shrinks by 1 ms per ms, so after (delay - max) the same request fits: a truthful Retry-After.
      this.limiter.refund(key, cost).catch((e: unknown) => this.report(e, req));
      const retryAfterMs = d.delayMs - this.maxDelayMs;
      d = {
        ...d,
        allowed: false,
        remaining: d.limits === undefined ? d.remaining + cost : d.remaining,
        retryAfterMs,
        delayMs: 0,
        reason: "limit",
      };
    }
    const limited = !d.allowed;
    if (this.onDecision !== undefined) {
      try {
        this.onDecision({ req, key, cost, decision: d, limited, shadow: this.shadow });
      } catch (e) {
        this.report(e, req);
      }
    }
    if (limited && !this.shadow) {
      this.writeHeaders(d, headers);
      const violated =
        d.limits === undefined || d.allowed !== decision.allowed ? [d.policyName] : d.limits.filter((l) => !l.allowed).map((l) => l.name);
      return this.refuse(tooManyRequests(toSeconds(d.retryAfterMs), violated), headers, d, key, cost);
    }
    this.writeHeaders(d, headers);
    return {
      pass: true,
      status: 0,
      headers,
      problem: undefined,
      body: undefined,
      contentType: PROBLEM_CONTENT_TYPE,
      delayMs: this.shadow || limited ? 0 : d.delayMs,
      decision: d,
      key,
      cost,
      settles: this.countOnly !== undefined && !limited,
    };
  }

  private writeHeaders(d: Decision, out: [string, string][]): void {
    if (this.headerWriter !== undefined) this.headerWriter.write(d, this.headerWriter.needsClock ? this.clock() : 0, out);
  }

  private refuse(problem: ProblemDetails, headers: [string, string][], decision?: Decision, key?: string, cost = 0): RateLimitResult {
    // RFC 9110 section 10.2.3: delay-seconds. Rounded up so a client that obeys is never early;
    // it equals the `t` / `reset` of the limit that denied in every header style.
    if (problem.status === 429 && problem["retry-after"] !== undefined) headers.push(["Retry-After", String(problem["retry-after"])]);
    return {
      pass: false,
      status: problem.status,
      headers,
      problem,
      body: JSON.stringify(problem),
      contentType: PROBLEM_CONTENT_TYPE,
      delayMs: 0,
      decision,
      key,
      cost,
      settles: false,
    };
  }

  private report(e: unknown, req: Req): void {
    if (this.onError === undefined) return;
    try {
      this.onError(e, req);
    } catch {
      // A throwing error reporter must not take the request down with it.
    }
  }

  /**
   * Holds an admitted request for its shaping delay. Resolves `true` when the wait is over, or
   * `false` if `signal` aborts first (the client left): its place in the queue is then given back.
   */
  hold(result: RateLimitResult, signal: AbortSignal | undefined, req: Req): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (signal?.aborted) {
        this.release(result, req);
        resolve(false);
        return;
      }
      let settled = false;
      const onAbort = (): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.release(result, req);
        resolve(false);
      };
      const timer = setTimeout(() => {
        // One more turn of the event loop before passing the request on: a disconnect that arrived
        // while the loop was busy is read in the poll phase, which runs before setImmediate callbacks.
        setImmediate(() => {
          signal?.removeEventListener("abort", onAbort);
          if (settled) return;
          settled = true;
          if (signal?.aborted) {
            this.release(result, req);
            resolve(false);
          } else resolve(true);
        });
      }, result.delayMs);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Gives back the cost of an admitted request that will not be served. */
  release(result: RateLimitResult, req: Req): void {
    if (result.key === undefined || result.cost === 0 || !result.pass || result.decision === undefined) return;
    this.limiter.refund(result.key, result.cost).catch((e: unknown) => this.report(e, req));
  }

  /**
   * After the response: with `countOnly`, refunds the requests that should not count.
   * @param statusCode the response's status, or `undefined` when the client left before it was sent (counts as failed)
   */
  settle(result: RateLimitResult, statusCode: number | undefined, req: Req): void {
    if (!result.settles) return;
    const failed = statusCode === undefined || this.isFailed(statusCode);
    if ((this.countOnly === "failed") !== failed) this.release(result, req);
  }
}
