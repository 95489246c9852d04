/**
 * The middleware's options as the user writes them (the public contract every adapter shares)
 * and as the limiter class uses them once resolved. The resolution, with one error naming every
 * wrong field, is in resolve-options.ts.
 */
import type { Decision } from "../core/decision.js";
import type { LimitSpec } from "../core/options.js";
import type { ConcurrencyLimiter, ConcurrencyLimiterOptions } from "../concurrency.js";
import type { RateLimiter, RateLimiterOptions } from "../limiter.js";
import type { Store } from "../store.js";
import type { CostOption, CostRule } from "./cost.js";
import type { HeaderStyle, HeaderWriter } from "./headers.js";
import type { AddressSet, ClientIpOptions, ClientIpResolver } from "./ip.js";
import type { KeyBuilder, KeyPart } from "./keys.js";
import type { RateLimitWarning, ValidateOption, Validations } from "./validations.js";

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
   * takes a lease, released when the response finishes or the client goes away and renewed
   * every third of `leaseMs` until then (a request longer than `leaseMs` keeps its slot); a
   * request that finds every slot held gets a 429 (its rate-limit charge given back), with
   * `Retry-After: 1`.
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
  /** Cost units per request (a cost function's bad answer is a 500; one above what the policy ever admits, a 429). A table is matched on `"METHOD route"` (HEAD, which runs the GET handler, then on `"GET route"`), then `"route"`; unmatched requests cost 1. @default 1 */
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
  /** What counts as failed for `countOnly`; may answer with a promise (a client gone before the response counts as failed). @default status >= 400 */
  isFailed?: (statusCode: number, req: Req) => boolean | Promise<boolean>;
  /** Decide, send headers and report, but never block or delay. @default false */
  shadow?: boolean;
  /** Header styles to send, or `false` for none. @default "ietf" */
  headers?: HeaderStyle | readonly HeaderStyle[] | false;
  /**
   * Shaping (leaky-bucket `mode: "shape"`): the longest a request is held; a longer wait is a 429.
   * At most 2^31 - 1 ms (about 24.8 days, what a timer holds): a larger value acts as that.
   * @default 30_000
   */
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
  /** Told about store failures and timeouts, and errors thrown by `key`, `cost`, `skip` (such a request is answered 500). */
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
  readonly isFailed: (statusCode: number, req: Req) => boolean | Promise<boolean>;
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
