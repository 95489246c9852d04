/**
 * One call to a limiter's store for the decision service, timed for the metrics: the store's
 * latency, the decision's reason, and failures: the library's refusal of a bad key becomes the
 * caller's CheckError; anything else the store threw is the store's own error, counted, as a
 * StoreFailure, whatever its type (a RangeError too: a table that cannot grow, a client's own
 * range check), so a store failure is never blamed on the client.
 */
import { MemoryStore, type Decision, type RateLimiter, type Store } from "ratekeeper";
import { CheckError, StoreFailure, type DecisionObserver } from "./types.js";

/**
 * With the in-memory store, about one call in this many is timed (at random gaps of 1 to twice
 * this many calls), the others reported with `storeLatencyAgain`: a call there takes well under
 * a microsecond, and its two clock reads (about 60 ns each on a VM's clock) were most of what
 * the observers cost per decision.
 */
export const MEMORY_STORE_TIMED_ONE_IN = 64;

/**
 * Asks a limiter's store for the service, reporting each call to the observer: its latency, its
 * reason, a failure. Every call is timed, except with the in-memory store and an observer that
 * takes `storeLatencyAgain` (see {@link MEMORY_STORE_TIMED_ONE_IN}); with no observer the clock
 * is never read.
 * @example
 * const timer = new StoreTimer(metrics, store);
 * const d = timer.run(limiter, "api|k", 1, false);
 */
export class StoreTimer {
  /** Calls left to report at the last timed latency before the next timed one. */
  private untimed = 0;
  /** xorshift32 state, for the gaps between timed calls. */
  private rnd = 0x9e3779b9;
  private readonly sampled: boolean;

  constructor(
    readonly observer: DecisionObserver | undefined,
    store: Store,
  ) {
    this.sampled = observer?.storeLatencyAgain !== undefined && store instanceof MemoryStore;
  }

  /**
   * The limiter's decision; the decision itself when the store answers synchronously (the memory
   * store), else its promise.
   * @throws CheckError for a bad key or cost; the store's own error otherwise
   */
  run(limiter: RateLimiter, stateKey: string, cost: number, peek: boolean): Decision | Promise<Decision> {
    const observer = this.observer;
    if (observer === undefined) {
      const d = call(undefined, limiter, stateKey, cost, peek);
      return d instanceof Promise ? d.then(undefined, (e: unknown) => failed(undefined, e, limiter, stateKey, cost)) : d;
    }
    if (this.untimed > 0) {
      this.untimed--;
      const d = call(observer, limiter, stateKey, cost, peek);
      return d instanceof Promise
        ? d.then(
            (x) => untimedRan(observer, x),
            (e: unknown) => failed(observer, e, limiter, stateKey, cost),
          )
        : untimedRan(observer, d);
    }
    const t0 = performance.now();
    const d = call(observer, limiter, stateKey, cost, peek);
    // The gap once a timed call answered: untimed calls repeat its latency, and after a call
    // that threw there may be none to repeat (the first call: those calls went uncounted).
    if (this.sampled) this.untimed = this.gap();
    return d instanceof Promise
      ? d.then(
          (x) => ran(observer, x, t0),
          (e: unknown) => failed(observer, e, limiter, stateKey, cost),
        )
      : ran(observer, d, t0);
  }

  /** Calls left untimed before the next timed one: 0 to 127 (one timed in 64.5 on average). */
  private gap(): number {
    let x = this.rnd;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.rnd = x;
    return (x >>> 0) % (2 * MEMORY_STORE_TIMED_ONE_IN);
  }
}

/** The store call; a synchronous failure as {@link storeFailed} says. */
function call(
  observer: DecisionObserver | undefined,
  limiter: RateLimiter,
  stateKey: string,
  cost: number,
  peek: boolean,
): Decision | Promise<Decision> {
  try {
    return peek ? limiter.peek(stateKey, cost) : limiter.consumeNow(stateKey, cost);
  } catch (e) {
    return failed(observer, e, limiter, stateKey, cost);
  }
}

function failed(observer: DecisionObserver | undefined, e: unknown, limiter: RateLimiter, stateKey: string, cost: number): never {
  throw storeFailed(observer, e, limiter, stateKey, cost);
}

/** `String.prototype.isWellFormed` (ES2024; in every Node the service supports). */
interface WellFormed {
  isWellFormed(): boolean;
}

/**
 * Whether the library refuses `key` (ratekeeper's checkKey: a non-empty string of at most 1024
 * characters, well-formed), and so refused it before any store was asked.
 */
export function refusedKey(key: string): boolean {
  return key.length === 0 || key.length > 1024 || !(key as unknown as WellFormed).isWellFormed();
}

/**
 * What a limiter call that threw `e` was. Told by its input, never by the error's type or words
 * (a store may throw a RangeError of its own, which was answered 400, blaming the client):
 * - a key the library refuses (a caller's lone surrogate, handed to the service without a
 *   transport's checks): the caller's CheckError, with the library's message naming the key;
 * - a cost the service should have refused (requestCost, the oversize check): a bug, as is (500);
 * - anything else: the store failed, a counted {@link StoreFailure} (503).
 */
function storeFailed(observer: DecisionObserver | undefined, e: unknown, limiter: RateLimiter, stateKey: string, cost: number): unknown {
  if (refusedKey(stateKey)) return new CheckError(e instanceof Error ? e.message : String(e));
  if (!Number.isSafeInteger(cost) || cost < 1 || cost > limiter.maxCost) return e;
  observer?.storeError("error");
  return new StoreFailure("store", e, limiter.store);
}

/** Reports a timed call's latency, and the decision's reason. */
function ran(observer: DecisionObserver, d: Decision, t0: number): Decision {
  observer.storeLatency((performance.now() - t0) / 1000);
  return reasoned(observer, d);
}

/** Reports an untimed call (as long as the last timed one), and the decision's reason. */
function untimedRan(observer: DecisionObserver, d: Decision): Decision {
  observer.storeLatencyAgain?.();
  return reasoned(observer, d);
}

function reasoned(observer: DecisionObserver, d: Decision): Decision {
  if (d.reason !== undefined) {
    observer.decisionReason?.(d.reason);
    if (d.reason === "store-error" || d.reason === "insurance" || d.reason === "degraded") observer.storeError("failure_policy");
  }
  return d;
}

/**
 * Forgets a state key (the admin API's reset); the store's failure a {@link StoreFailure}, a key
 * the library refuses (its validation rejects asynchronously) the caller's CheckError.
 */
export async function resetKey(limiter: RateLimiter, state: string): Promise<void> {
  try {
    await limiter.reset(state);
  } catch (e) {
    throw storeFailed(undefined, e, limiter, state, 1);
  }
}
