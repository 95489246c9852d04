import type { Decision } from "./core/decision.js";
import type { ResolvedLease } from "./core/lease-options.js";
import type { LeaseReason } from "./core/lease-reason.js";
import type { ResolvedLimit } from "./core/options.js";

/**
 * Where limit state lives: the only seam between the limiter and storage. A store is bound
 * once per {@link RateLimiter} to that limiter's limits; the bound store then answers decisions.
 * Implementations: `MemoryStore` (embedded default) and `RedisStore` (`ratekeeper/redis`).
 */
export interface Store {
  /**
   * Prepares the store for one limiter's limits. `namespace` separates limiters that share a
   * store: the same key under two different policies never shares state.
   */
  bind(limits: readonly ResolvedLimit[], namespace: string, options?: BindOptions): BoundStore;
  /**
   * Prepares the store for one concurrency limit (`ConcurrencyLimiter`): at most `limit` leases
   * per key, shared by every limiter bound with the same namespace. Both built-in stores have it.
   */
  bindLeases?(limit: number, namespace: string, options?: ClockOptions): BoundLeases;
}

export type { ResolvedLease } from "./core/lease-options.js";

/** Whose clock the times of a binding are on. */
export interface ClockOptions {
  /**
   * The limiter reads a clock of its own (its `clock` option) and passes every reading as
   * `nowMs`. Then the store must not judge when this binding's keys expire by its own clock: a
   * key still live on the injected clock may look expired on the process's (the memory store's
   * sweep timer leaves such keys to its bounds and to their next use).
   */
  readonly injectedClock?: boolean;
}

/** How a limiter uses a store beyond its limits. */
export interface BindOptions extends ClockOptions {
  /**
   * Quota leasing (the RateLimiter option `lease`): decide locally from blocks of a key's
   * allowance taken from the store. A store where decisions are already local (memory) ignores it.
   */
  readonly lease?: ResolvedLease;
}

/**
 * A store bound to one set of limits. `nowMs` is the injected clock's reading, or `undefined`
 * when none was injected (then the store uses its own time: the process clock for memory,
 * Redis's `TIME` for Redis). Answers may be synchronous (memory) or promises (Redis).
 */
export interface BoundStore {
  /**
   * Decides `cost` for `key` and charges every limit when admitted (all-or-nothing).
   * `maxDelayMs` (shaping: leaky bucket `mode: "shape"`): the longest the caller will hold the
   * request. A store must deny a request whose wait would be longer, in the same step and
   * charging nothing, with `retryAfterMs` the time until the wait fits (`Algorithm.check` in
   * core does this; the contract suite checks it). Undefined: no bound. A cost above what the
   * limits could ever admit (core/max-cost.ts: RateLimiter's `maxCost`) is bad input: a store
   * refuses it, as RateLimiter does, with its RangeError before touching any state (the memory
   * store throws it, the Redis stores reject with it); the same for `peek`.
   */
  consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Decision | Promise<Decision>;
  /** The decision `consume` would give, changing nothing. */
  peek(key: string, cost: number, nowMs: number | undefined): Decision | Promise<Decision>;
  /** Gives back `cost` units admitted earlier. */
  refund(key: string, cost: number, nowMs: number | undefined): void | Promise<void>;
  /** Forgets the key. */
  reset(key: string): void | Promise<void>;
}

/** What a store says about one key's leases: after an acquire, a renew, a release, or a count. */
export interface LeaseAnswer {
  /** Acquired (renewed, released); for a count, always false. */
  readonly ok: boolean;
  /** Slots free now. */
  readonly remaining: number;
  /** 0 unless an acquire was refused: ms until a slot frees if nobody releases one (the earliest expiry). */
  readonly retryAfterMs: number;
  /** Set when the answer did not come from the key's leases as usual: the limit was full, or the store's failure policy answered. */
  readonly reason: LeaseReason | undefined;
}

/**
 * A store bound to one concurrency limit. Lease ids are made by the caller, unique over every
 * process (`ConcurrencyLimiter` does). `nowMs` as in {@link BoundStore}. A lease expires `leaseMs`
 * after its acquire or its last renew.
 */
export interface BoundLeases {
  /** Takes a slot for `id` when one is free; an `id` already held is renewed instead. */
  acquire(key: string, id: string, leaseMs: number, nowMs: number | undefined): LeaseAnswer | Promise<LeaseAnswer>;
  /** Extends a held lease; `ok: false` when it is no longer held (expired or released). */
  renew(key: string, id: string, leaseMs: number, nowMs: number | undefined): LeaseAnswer | Promise<LeaseAnswer>;
  /**
   * Gives the slot back; nothing when it is not held. `leaseMs`: the limiter's, for a store where
   * a lease may be held elsewhere for that long (RedisStore: a release it does not hold stands that long).
   */
  release(key: string, id: string, nowMs: number | undefined, leaseMs?: number): LeaseAnswer | Promise<LeaseAnswer>;
  /** What an acquire would say now (with `ok: false`), taking nothing. */
  count(key: string, nowMs: number | undefined): LeaseAnswer | Promise<LeaseAnswer>;
}
