import type { Outcome } from "../decision.js";
import type { ResolvedLimit } from "../options.js";
import type { Ring } from "./ring.js";

/**
 * The state one limit keeps for one key: two numbers and, for the log and the sub-window
 * counters, a ring. Every algorithm uses this one shape (so the memory store's entries stay
 * monomorphic); what `a`, `b` and `ring` mean is documented in each algorithm's file. The Lua
 * scripts store these values, less what only speeds up the memory store: the sliding log's search
 * hint in `b` and the sliding window's ring total (its extra last slot). Keep `b` a small integer:
 * a double there turns the field into a boxed number in every algorithm's state.
 *
 * `ring` is a plain array (`number[]`, packed) for a sliding window of up to 64 slots, else a
 * Float64Array (a larger window's, and the sliding log's): ring.ts says why. Any number stays
 * exact in either.
 */
export interface LimitState {
  a: number;
  b: number;
  ring: Ring | null;
}

/**
 * An algorithm as a pure state transition over integer milliseconds. No I/O, no clock: `nowMs`
 * is given. `check` never changes the state; `commit` applies an admitted cost.
 *
 * Each algorithm writes its own `check` and `consume` as two lines around its private `decide`,
 * and the files look alike on purpose: methods made by one shared factory would all be closures
 * of one function literal, which share their type feedback in V8, so the `decide` call inside
 * would see every algorithm and stop being inlined into the store's hot path.
 */
export interface Algorithm {
  /** The state of a key never seen (or expired). */
  init(lim: ResolvedLimit): LimitState;
  /**
   * Would `cost` be admitted at `nowMs`? Fills `out` as the decision would read if it were
   * (remaining and resetAfterMs after the admission) or was not. Changes nothing.
   * `maxDelayMs` (shaping only: leaky bucket `mode: "shape"`; the others ignore it): the longest
   * the caller will hold the request; a longer wait is a denial. Undefined: no bound.
   */
  check(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit, out: Outcome, maxDelayMs?: number): void;
  /**
   * `check`, then `commit` if allowed, computed once: the single-limit hot path. Leaves `out` and
   * the state exactly as `check` followed by `commit` would.
   */
  consume(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit, out: Outcome, maxDelayMs?: number): void;
  /** Applies an admitted `cost`. Only call after `check` said allowed. */
  commit(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit): void;
  /** Gives back up to `cost` units admitted earlier (a request that should not count after all). */
  refund(s: LimitState, nowMs: number, cost: number, lim: ResolvedLimit): void;
}
