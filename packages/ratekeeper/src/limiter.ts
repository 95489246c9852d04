import type { Decision } from "./core/decision.js";
import { collectIssues, describeValue, RateLimitConfigError, type ConfigIssue } from "./core/errors.js";
import { resolveLease, type LeaseOptions } from "./core/lease-options.js";
import { resolveLimit, resolveLimits, type LimitSpec, type ResolvedLimit } from "./core/options.js";
import { policyId } from "./core/policy-id.js";
import { checkKey } from "./key.js";
import { MemoryStore } from "./stores/memory.js";
import type { BoundStore, Store } from "./store.js";
import { keepStringPrototypeFast } from "./string-prototype.js";
import { isPlainObject } from "./core/plain-object.js";
import { costTooHigh, maxCostOf } from "./core/max-cost.js";
import { describeAs, limitWords } from "./core/describe.js";

interface CommonOptions {
  /** Where state lives. @default a new `MemoryStore()` */
  store?: Store;
  /**
   * Milliseconds since the epoch. Injected for tests and replays; without it the memory store
   * reads `Date.now()` (once per turn of the event loop) and the Redis store reads Redis's own
   * clock (`TIME`).
   */
  clock?: () => number;
  /**
   * Separates limiters that share a store. By default it is derived from the limits, so two
   * servers with the same policy share state and two different policies never do.
   */
  namespace?: string;
  /**
   * Quota leasing for hot keys, on a shared store (Redis): this process takes blocks of a key's
   * allowance and decides locally, one store call per block instead of per decision; unused
   * units go back. One limit of fixed-window, token-bucket, leaky-bucket (police) or gcra.
   * Exact for fixed windows; for buckets a block may be spent up to `blockMs` after it was taken
   * (docs/leasing.md). The memory store is already local and ignores it.
   * @default false
   */
  lease?: boolean | LeaseOptions;
}

/**
 * Options of {@link RateLimiter}: one limit (its fields inline), or several under `limits`.
 * @example { algorithm: "sliding-window", limit: 100, window: "1m" }
 * @example { limits: [{ algorithm: "fixed-window", limit: 100, window: "1m" }, { algorithm: "gcra", limit: 2, window: "1s" }] }
 */
export type RateLimiterOptions = (LimitSpec & CommonOptions & { limits?: undefined }) | (CommonOptions & { limits: LimitSpec[] });

const COMMON_KEYS = new Set(["store", "clock", "namespace", "limits", "lease"]);

/**
 * Applies one or several limits to keys (a user, an IP, an API key, a route, or a mix).
 * A denial is a {@link Decision}, never an exception; bad input throws a
 * `RateLimitConfigError` or `RangeError` that names the field.
 * @example
 * const limiter = new RateLimiter({ algorithm: "sliding-window", limit: 100, window: "1m" });
 * const d = await limiter.consume("user:42");
 * if (!d.allowed) res.status(429).set("Retry-After", String(Math.ceil(d.retryAfterMs / 1000)));
 */
export class RateLimiter {
  /** The limits, with every option resolved. */
  readonly limits: readonly ResolvedLimit[];
  /** The most cost one request may ask for: the smallest capacity of the limits. */
  readonly maxCost: number;
  readonly store: Store;
  readonly namespace: string;
  private readonly bound: BoundStore;
  /** The injected clock (option `clock`), or undefined when the store keeps its own time. */
  readonly clock: (() => number) | undefined;

  constructor(options: RateLimiterOptions) {
    // Once per process: string methods stay fast even if the app loads ioredis (string-prototype.ts).
    keepStringPrototypeFast();
    if (!isPlainObject(options)) {
      throw new RateLimitConfigError([{ path: "options", message: `must be an object (got ${describeValue(options)})` }]);
    }
    const issues: ConfigIssue[] = [];
    const o = options as unknown as Record<string, unknown>;
    if (o.limits !== undefined) {
      for (const k of Object.keys(o)) {
        if (!COMMON_KEYS.has(k) && o[k] !== undefined)
          issues.push({ path: k, message: "belongs inside each entry of limits, not beside it" });
      }
    }
    const limits =
      collectIssues(issues, () => {
        if (o.limits !== undefined) return resolveLimits(o.limits);
        const spec: Record<string, unknown> = {};
        for (const k of Object.keys(o)) if (!COMMON_KEYS.has(k)) spec[k] = o[k];
        return [resolveLimit(spec)];
      }) ?? [];
    if (o.store !== undefined && (typeof o.store !== "object" || o.store === null || typeof (o.store as Store).bind !== "function")) {
      issues.push({
        path: "store",
        message: `must be a store such as new MemoryStore() or new RedisStore({ client }) (got ${describeValue(o.store)})`,
      });
    }
    if (o.clock !== undefined && typeof o.clock !== "function") {
      issues.push({ path: "clock", message: `must be a function returning milliseconds since the epoch (got ${describeValue(o.clock)})` });
    }
    if (o.namespace !== undefined && (typeof o.namespace !== "string" || o.namespace.length === 0 || o.namespace.length > 64)) {
      issues.push({ path: "namespace", message: `must be a string of 1-64 characters (got ${describeValue(o.namespace)})` });
    }
    const lease = limits.length > 0 ? resolveLease(o.lease, limits, issues) : undefined;
    if (issues.length > 0) throw new RateLimitConfigError(issues);
    this.limits = limits;
    this.maxCost = maxCostOf(limits);
    this.store = (o.store as Store | undefined) ?? new MemoryStore();
    this.namespace = (o.namespace as string | undefined) ?? policyId(limits);
    this.clock = o.clock as (() => number) | undefined;
    const injectedClock = this.clock !== undefined;
    this.bound =
      lease === undefined && !injectedClock
        ? this.store.bind(limits, this.namespace)
        : this.store.bind(limits, this.namespace, lease === undefined ? { injectedClock } : { lease, injectedClock });
  }

  /**
   * Charges `cost` to `key` if every limit has room (all-or-nothing) and says whether the
   * request may proceed.
   * @param cost cost units of this request (say `GET /user` 1, `POST /user` 2, from one allowance) @default 1
   * @param maxDelayMs shaping (leaky bucket `mode: "shape"`): the longest you will hold the
   * request. A longer wait is a denial, charging nothing, with `retryAfterMs` the time until the
   * wait fits. Limits that do not shape ignore it. @default no bound
   * @throws RangeError (as a rejected promise) when `key`, `cost` or `maxDelayMs` is bad
   * @example const d = await limiter.consume("user:42", 1, 2_000); // hold at most 2 s: if (d.allowed) await sleep(d.delayMs)
   */
  consume(key: string, cost = 1, maxDelayMs?: number): Promise<Decision> {
    // A plain function, not an `async` one: as fast on the memory store (measured, see
    // docs/benchmarks/memory.md), and a store's promise (Redis) is returned as is, two microtask
    // turns sooner than an async function's `return promise`. The try/catch keeps the async
    // contract: bad input, a bad clock reading or a throwing store give a rejected promise.
    try {
      const d = this.consumeNow(key, cost, maxDelayMs);
      // A store's promise (Redis) goes back as is. Reading a field of a decision first also lets
      // V8 know its shape, and then Promise.resolve skips the generic lookup of a "then" method
      // that resolving a promise with an object otherwise makes (~15 ns per decision).
      if ((d as Partial<Decision>).allowed === undefined) return d as Promise<Decision>;
      return Promise.resolve(d);
    } catch (e) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the thrown value, as an async function would reject with
      return Promise.reject(e);
    }
  }

  /**
   * Like {@link RateLimiter.consume}, but returns the decision itself when the store answers
   * synchronously (the memory store), and the store's promise otherwise. For hot paths such as
   * the HTTP middleware (`ratekeeper/http`), which then pass a request on without a microtask.
   * @throws RangeError synchronously when `key`, `cost` or `maxDelayMs` is bad
   * @example const d = limiter.consumeNow("user:42"); const decision = d instanceof Promise ? await d : d;
   */
  consumeNow(key: string, cost = 1, maxDelayMs?: number): Decision | Promise<Decision> {
    // The common call (cost 1, the store's own clock) is all the code below; another cost or an
    // injected clock takes consumeWith. Why: V8 inlines about 920 bytes of bytecode into one
    // optimized function, and the memory store's whole decision is near that, so every byte here
    // counts; the checks of another cost and the clock's reading (114 bytes) are kept out of it.
    if (cost !== 1 || this.clock !== undefined) return this.consumeWith(key, cost, maxDelayMs);
    checkKey(key);
    if (maxDelayMs !== undefined) checkMaxDelay(maxDelayMs);
    return this.bound.consume(key, 1, undefined, maxDelayMs);
  }

  /** {@link RateLimiter.consumeNow} with another cost than 1 or an injected clock. */
  private consumeWith(key: string, cost: number, maxDelayMs: number | undefined): Decision | Promise<Decision> {
    this.validate(key, cost);
    if (maxDelayMs !== undefined) checkMaxDelay(maxDelayMs);
    return this.bound.consume(key, cost, this.now(), maxDelayMs);
  }

  /** The decision a request of `cost` (default 1) would get now, changing nothing. */
  peek(key: string, cost = 1): Promise<Decision> {
    try {
      this.validate(key, cost);
      return Promise.resolve(this.bound.peek(key, cost, this.now()));
    } catch (e) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the thrown value, as an async function would reject with
      return Promise.reject(e);
    }
  }

  /** Gives back `cost` units charged earlier, for a request that should not count after all. */
  async refund(key: string, cost = 1): Promise<void> {
    this.validate(key, cost);
    await this.bound.refund(key, cost, this.now());
  }

  /** Forgets the key: its next request starts afresh. */
  async reset(key: string): Promise<void> {
    this.validate(key, 1);
    await this.bound.reset(key);
  }

  /** The injected clock's reading, or `undefined` to let the store use its own time. */
  private now(): number | undefined {
    if (this.clock === undefined) return undefined;
    const t = this.clock();
    if (!Number.isFinite(t)) throw new RangeError(`clock: must return finite milliseconds since the epoch (got ${describeValue(t)})`);
    return Math.floor(t);
  }

  /** Throws a RangeError naming `key` or `cost` when either is bad (cost 1 needs no check). */
  private validate(key: unknown, cost: unknown): void {
    checkKey(key);
    if (cost !== 1) this.checkCost(cost);
  }

  private checkCost(cost: unknown): void {
    if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
      throw new RangeError(`cost: must be a positive whole number of cost units (got ${describeValue(cost)})`);
    }
    if (cost > this.maxCost) throw costTooHigh(cost, this.maxCost);
  }
}

/** Throws a RangeError naming `maxDelayMs` unless it is a whole number of milliseconds >= 0. */
function checkMaxDelay(maxDelayMs: unknown): void {
  if (typeof maxDelayMs !== "number" || !Number.isSafeInteger(maxDelayMs) || maxDelayMs < 0) {
    throw new RangeError(
      `maxDelayMs: must be a whole number of milliseconds >= 0, or undefined for no bound (got ${describeValue(maxDelayMs)})`,
    );
  }
}

describeAs(RateLimiter, "RateLimiter", (r) => ({ namespace: r.namespace, limits: r.limits.map(limitWords), store: r.store }));
