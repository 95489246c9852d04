import type { Decision, LimitOutcome } from "../core/decision.js";
import type { RateLimiter } from "../limiter.js";
import { toSeconds } from "./headers.js";
import { normalizeIp, stripPort } from "./ip.js";
import type { RequestAccess } from "./keys.js";
import type { RateLimitOptions, ResolvedHttpOptions } from "./options.js";
import { resolveHttpOptions } from "./resolve-options.js";
import { costTooHigh, forbidden, internalError, noClientAddress, tooManyRequests, tooManyRequestsFor, unavailable } from "./problem.js";
import { checkCost, type BadCost } from "./cost.js";
import { PASS, admission, refusal, type RateLimitResult } from "./result.js";
import { LeaseGate } from "./leases.js";
import { Shaper } from "./shaping.js";
import { RefusalTexts } from "./refusal-text.js";

/** The one policy that denied `d`, or undefined when several did (a decision of several limits). */
function soleViolated(d: Decision): string | undefined {
  if (d.limits === undefined) return d.policyName;
  let name: string | undefined;
  for (const l of d.limits) {
    if (l.allowed) continue;
    if (name !== undefined) return undefined;
    name = l.name;
  }
  return name;
}

/**
 * The client address the framework resolved through its proxy-trust setting (Express's `req.ip`),
 * without a port: Express and Fastify take a forwarding header's entry as it is written, and some
 * proxies write one (Azure App Service: `X-Forwarded-For: 203.0.113.9:5678`), which would
 * otherwise be no address at all. ratekeeper's own header parsing drops it the same way.
 */
function frameworkAddress<Req>(a: RequestAccess<Req>, req: Req): string | undefined {
  const ip = (a.frameworkIp as (req: Req) => string | undefined)(req);
  return ip === undefined ? undefined : (normalizeIp(ip) ?? normalizeIp(stripPort(ip)));
}

/** What `onError` is told when a request without a client address is refused. */
const NO_ADDRESS =
  'rate limit: refused a request with no client address (noAddress: "deny"): the server may listen on a unix socket; ' +
  'key on what your proxy passes, listen on TCP with trustedProxies, or set noAddress: "allow"';

export type { RequestAccess, KeyInfo, KeyPart } from "./keys.js";
export type { CostOption } from "./cost.js";
export type { RateLimitOptions, RateLimitEvent } from "./options.js";
export type { RateLimitWarning, ValidateOption, ValidationCode, FrameworkTrust } from "./validations.js";
export type { RateLimitResult } from "./result.js";

/**
 * The framework-neutral middleware: resolves the key and cost of a request, asks the limiter,
 * and says what to send. Adapters (`ratekeeper/express`, `/fastify`, `/hono`, `/node`) apply it.
 * Options are resolved in `options.ts`, keys built in `keys.ts`, costs in `cost.ts`; what happens
 * to an admitted request afterwards (holding, refunds) is in `shaping.ts`.
 * @example
 * const rl = new HttpRateLimiter({ limiter: { algorithm: "gcra", limit: 10, window: "1s" } }, access);
 * const r = await rl.check(req);
 */
export class HttpRateLimiter<Req> {
  /** The rate limit; undefined when the middleware only limits requests in flight (`concurrency`). */
  readonly limiter: RateLimiter | undefined;
  readonly shadow: boolean;
  readonly maxDelayMs: number;
  /**
   * The longest wait the limiter may admit with (`maxDelayMs`), or undefined in shadow mode,
   * which never holds a request and so charges it whatever its wait.
   */
  private readonly delayBound: number | undefined;
  private readonly o: ResolvedHttpOptions<Req>;
  private readonly access: RequestAccess<Req>;
  private readonly shaper: Shaper<Req>;
  /** The `concurrency` option: leases for admitted requests. */
  private readonly leases: LeaseGate<Req> | undefined;
  /** Whether {@link HttpRateLimiter.check} can answer without awaiting user callbacks. */
  private readonly syncPath: boolean;
  /** Whether a request's KeyInfo is needed (a key of more than the address, or a cost rule that reads the route). */
  private readonly needsInfo: boolean;
  /** 429 bodies and details naming one policy, kept (see refusal-text.ts). */
  private readonly refusals = new RefusalTexts();

  /**
   * @param options see {@link RateLimitOptions}
   * @param access how to read the framework's request
   * @throws RateLimitConfigError listing every bad option with its name
   */
  constructor(options: RateLimitOptions<Req>, access: RequestAccess<Req>) {
    const o = resolveHttpOptions(options, access, this);
    this.o = o;
    this.access = access;
    this.limiter = o.limiter;
    this.shadow = o.shadow;
    this.maxDelayMs = o.maxDelayMs;
    this.delayBound = o.shadow ? undefined : o.maxDelayMs;
    const report = (e: unknown, req: Req) => this.report(e, req);
    this.shaper = new Shaper(o.limiter, o.countOnly, o.isFailed, report);
    this.leases = o.concurrency === undefined ? undefined : new LeaseGate(o.concurrency, o.limiter, o.shadow, o.storeDeny, report);
    this.syncPath = o.skip === undefined && o.keys.sync;
    this.needsInfo = !o.keys.ipOnly || o.cost.needsInfo;
  }

  /** The client's address as the limiter sees it: resolved through trusted proxies, IPv6 grouped. */
  clientIp(req: Req): string | undefined {
    const ip = this.resolveIp(req);
    return ip === undefined ? undefined : this.o.ips.group(ip);
  }

  /**
   * The client address: through `trustedProxies` when given; else through the framework's own
   * proxy-trust setting when it has one (Express `trust proxy`, Fastify `trustProxy`); else the
   * socket's peer. The validations watch the way (see validations.ts).
   */
  private resolveIp(req: Req): string | undefined {
    const ips = this.o.ips;
    const a = this.access;
    if (ips.trustsProxies) {
      const ip = ips.resolve(a.remoteAddress(req), a.header(req, ips.header));
      if (this.o.validations.watchTrust && a.frameworkTrust !== undefined) this.compareTrust(req, ip);
      return ip;
    }
    if (this.o.ownTrust) return ips.resolve(a.remoteAddress(req), undefined);
    if (a.frameworkTrust !== undefined) {
      const t = a.frameworkTrust(req);
      if (t !== undefined) {
        if (t.permissive && this.o.validations.watchTrust) this.o.validations.permissive(t);
        return frameworkAddress(a, req);
      }
    }
    const peer = ips.resolve(a.remoteAddress(req), undefined);
    if (this.o.validations.watchForwarded) {
      const header =
        a.forwarded !== undefined
          ? a.forwarded(req)
          : a.header(req, "x-forwarded-for") !== undefined
            ? "X-Forwarded-For"
            : a.header(req, "forwarded") !== undefined
              ? "Forwarded"
              : undefined;
      if (header !== undefined) this.o.validations.forwardedIgnored(header, peer);
    }
    return peer;
  }

  /** With `trustedProxies` and a framework setting both given: warn once if they disagree on a request. */
  private compareTrust(req: Req, ours: string | undefined): void {
    const v = this.o.validations;
    const t = (this.access.frameworkTrust as (req: Req) => ReturnType<NonNullable<RequestAccess<Req>["frameworkTrust"]>>)(req);
    if (t === undefined) return;
    if (--v.overrideChecks <= 0) v.watchTrust = false;
    const theirs = frameworkAddress(this.access, req);
    if (theirs !== ours) v.overridden(t, ours, theirs);
  }

  /**
   * Decides one request. Never throws or rejects: errors from the store or from user callbacks
   * go to `onError` and the request is let through (or refused with 503 when
   * `failure: "closed"`). Answers synchronously when it can (no `skip`, no key function, a
   * store that answers synchronously: the memory store), so adapters pass the request on
   * without a microtask; otherwise returns a promise.
   */
  check(req: Req): RateLimitResult | Promise<RateLimitResult> {
    if (!this.syncPath) return this.checkAsync(req);
    let key: string;
    let cost: number;
    try {
      const ip = this.addressOrAnswer(req);
      if (typeof ip !== "string") return ip;
      const info = this.needsInfo ? this.o.keys.info(req, ip) : undefined;
      key = this.o.keys.buildSync(req, ip, this.o.keys.ipOnly ? undefined : info);
      cost = this.o.cost.of(req, info);
    } catch (e) {
      return this.broken(e, req);
    }
    return this.decide(req, key, cost);
  }

  /** The general path: awaits `skip` and key functions. */
  private async checkAsync(req: Req): Promise<RateLimitResult> {
    let key: string;
    let cost: number;
    try {
      if (this.o.skip !== undefined && (await this.o.skip(req))) return PASS;
      const ip = this.addressOrAnswer(req);
      if (typeof ip !== "string") return ip;
      const info = this.needsInfo ? this.o.keys.info(req, ip) : undefined;
      key = await this.o.keys.buildAsync(req, ip, this.o.keys.ipOnly ? undefined : info);
      cost = this.o.cost.of(req, info);
    } catch (e) {
      return this.broken(e, req);
    }
    return this.decide(req, key, cost);
  }

  /**
   * Asks the limiter about a request whose key and cost are known. A cost the limiter cannot
   * take, and a RangeError from it (a key function's ill-formed key, an injected clock's bad
   * reading), are the app's own errors (`broken`); anything else it throws or rejects with is
   * the store's (`failed`, the `failure` policy).
   */
  private decide(req: Req, key: string, cost: number): RateLimitResult | Promise<RateLimitResult> {
    if (this.limiter === undefined) return this.leaseOnly(req, key);
    if (cost !== 1) {
      const bad = checkCost(cost, this.limiter);
      if (bad !== undefined) return this.badCost(bad, req);
    }
    let d: Decision | Promise<Decision>;
    try {
      d = this.consume(key, cost);
    } catch (e) {
      return e instanceof RangeError ? this.broken(e, req) : this.failed(e, req);
    }
    if (d instanceof Promise) {
      return d.then(
        (decision) => this.admit(req, this.verdict(req, key, cost, decision)),
        (e: unknown) => (e instanceof RangeError ? this.broken(e, req) : this.failed(e, req)),
      );
    }
    return this.admit(req, this.verdict(req, key, cost, d));
  }

  /** With `concurrency`: an admitted request takes a lease (or is refused for want of one). */
  private admit(req: Req, r: RateLimitResult): RateLimitResult | Promise<RateLimitResult> {
    return this.leases === undefined || !r.pass ? r : this.leases.admit(r, req);
  }

  /** Only `concurrency` limits: the request's lease decides. */
  private leaseOnly(req: Req, key: string): Promise<RateLimitResult> {
    return (this.leases as LeaseGate<Req>).admit({ ...PASS, key }, req);
  }

  /**
   * The client's address as keys use it (IPv6 grouped by prefix), or the answer itself when the
   * allow list (`PASS`) or the deny list (403) decides, or when there is no address and the key
   * needs one (`noAddress`). Without an address, a key that does not use it sees `"unknown"`.
   */
  private addressOrAnswer(req: Req): string | RateLimitResult {
    const rawIp = this.resolveIp(req);
    if (rawIp === undefined) {
      if (!this.o.keys.usesIp) return "unknown";
      if (!this.o.noAddressDeny) return PASS;
      this.report(new Error(NO_ADDRESS), req);
      return refusal(noClientAddress(), []);
    }
    if (this.o.allow !== undefined && this.o.allow.has(rawIp)) return PASS;
    if (this.o.deny !== undefined && this.o.deny.has(rawIp)) return refusal(forbidden(), []);
    return this.o.ips.group(rawIp);
  }

  /** The store failed: the `failure` policy answers (`"open"` lets the request through). */
  private failed(e: unknown, req: Req): RateLimitResult {
    this.report(e, req);
    return this.o.storeDeny ? refusal(unavailable(), []) : PASS;
  }

  /**
   * The app's own code failed on this request (`key`, `cost`, `skip`, `getRemoteAddress` threw, or
   * a key the limiter cannot take): no outage, so no `failure` policy, and never a pass, which a
   * client able to make a key function throw (a malformed token it decodes) would use to go
   * unlimited. Reported, and answered 500.
   */
  private broken(e: unknown, req: Req): RateLimitResult {
    this.report(e, req);
    return refusal(internalError(), []);
  }

  /** A cost the limiter cannot take: 429 when it is more than the policy ever admits, else 500. */
  private badCost(bad: BadCost, req: Req): RateLimitResult {
    this.report(bad.error, req);
    return bad.tooHigh === undefined ? refusal(internalError(), []) : refusal(costTooHigh(bad.tooHigh), []);
  }

  /**
   * Asks the limiter (the store keeps its own timeout: RedisStore answers through its failure
   * policy). A shaping wait longer than `maxDelayMs` comes back as a denial, decided by the store
   * in the same step (nothing charged, `retryAfterMs` when the wait fits).
   */
  private consume(key: string, cost: number): Decision | Promise<Decision> {
    const l = this.limiter as RateLimiter;
    // consumeNow may be missing on a limiter from an older copy of the package.
    return typeof l.consumeNow === "function" ? l.consumeNow(key, cost, this.delayBound) : l.consume(key, cost, this.delayBound);
  }

  private verdict(req: Req, key: string, cost: number, d: Decision): RateLimitResult {
    const headers: [string, string][] = [];
    const limited = !d.allowed;
    const onDecision = this.o.onDecision;
    if (onDecision !== undefined) {
      try {
        onDecision({ req, key, cost, decision: d, limited, shadow: this.shadow });
      } catch (e) {
        this.report(e, req);
      }
    }
    this.writeHeaders(d, headers);
    if (limited && !this.shadow) {
      const seconds = toSeconds(d.retryAfterMs);
      const policy = soleViolated(d);
      if (policy === undefined) {
        const problem = tooManyRequests(
          seconds,
          (d.limits as readonly LimitOutcome[]).filter((l) => !l.allowed).map((l) => l.name),
        );
        return refusal(problem, headers, d, key, cost, JSON.stringify(problem));
      }
      const text = this.refusals.get(policy, seconds);
      headers.push(text.retryAfter);
      return refusal(tooManyRequestsFor(policy, seconds, text.detail), headers, d, key, cost, text.body, false);
    }
    return admission(headers, this.shadow || limited ? 0 : d.delayMs, d, key, cost, this.o.countOnly !== undefined && !limited);
  }

  private writeHeaders(d: Decision, out: [string, string][]): void {
    const w = this.o.headerWriter;
    if (w !== undefined) w.write(d, w.needsClock ? this.o.clock() : 0, out);
  }

  private report(e: unknown, req: Req): void {
    const onError = this.o.onError;
    if (onError === undefined) return;
    try {
      onError(e, req);
    } catch {
      // A throwing error reporter must not take the request down with it.
    }
  }

  /** The `concurrency` option's `leaseMs`, or undefined without that option. */
  get leaseMs(): number | undefined {
    return this.leases?.pool.leaseMs;
  }

  /** See {@link Shaper.hold}. */
  hold(result: RateLimitResult, signal: AbortSignal | undefined, req: Req): Promise<boolean> {
    return this.shaper.hold(result, signal, req);
  }

  /** See {@link Shaper.release}. */
  release(result: RateLimitResult, req: Req): void {
    this.shaper.release(result, req);
  }

  /** See {@link Shaper.releaseLease}. */
  releaseLease(result: RateLimitResult, req: Req): void {
    this.shaper.releaseLease(result, req);
  }

  /** See {@link Shaper.settle}. */
  settle(result: RateLimitResult, statusCode: number | undefined, req: Req): void {
    this.shaper.settle(result, statusCode, req);
  }
}
