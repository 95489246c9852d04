import type { Decision } from "./core/decision.js";
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
  bind(limits: readonly ResolvedLimit[], namespace: string): BoundStore;
}

/**
 * A store bound to one set of limits. `nowMs` is the injected clock's reading, or `undefined`
 * when none was injected (then the store uses its own time: the process clock for memory,
 * Redis's `TIME` for Redis). Answers may be synchronous (memory) or promises (Redis).
 */
export interface BoundStore {
  /** Decides `cost` for `key` and charges every limit when admitted (all-or-nothing). */
  consume(key: string, cost: number, nowMs: number | undefined): Decision | Promise<Decision>;
  /** The decision `consume` would give, changing nothing. */
  peek(key: string, cost: number, nowMs: number | undefined): Decision | Promise<Decision>;
  /** Gives back `cost` units admitted earlier. */
  refund(key: string, cost: number, nowMs: number | undefined): void | Promise<void>;
  /** Forgets the key. */
  reset(key: string): void | Promise<void>;
}
