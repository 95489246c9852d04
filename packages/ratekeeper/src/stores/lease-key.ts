/**
 * The state quota leasing keeps per key in one process (stores/leased-table.ts), and the source
 * of blocks it draws on (the shared store).
 */
import type { Decision } from "../core/decision.js";
import type { BlockOutcome } from "../core/lease-block.js";

/**
 * Where blocks of a key's allowance come from and go back to: the shared store (one call each).
 * `nowMs` as in `BoundStore` (store.ts): the injected clock, or `undefined` for the store's own time.
 */
export interface BlockSource {
  take(key: string, want: number, nowMs: number | undefined): Promise<BlockOutcome>;
  /** `epoch`: the block's, from its take; the store credits nothing when the key was reset since. */
  give(key: string, units: number, blockStart: number, epoch: number, nowMs: number | undefined): Promise<void>;
  /**
   * A decision starts waiting for a take: false when the store already has as many decisions
   * waiting as it allows (its backpressure bound, such as RedisStore's `maxPending`).
   */
  enter(): boolean;
  /** A decision that entered has its answer. */
  leave(): void;
}

/** A decision waiting for the block being taken. */
export interface Waiter {
  cost: number;
  /** The decision's injected time, if any: it is served only by a block valid then. */
  nowMs: number | undefined;
  resolve: (d: Decision | Promise<Decision>) => void;
}

/** This process's lease on one key. Local times are on the table's clock (the injected one, else `performance.now()`). */
export interface KeyLease {
  /** Units left in the current block. */
  units: number;
  /** Units spent from the current block: what a refund may put back into it. */
  spent: number;
  /** The key's reset epoch when the block was taken (BlockOutcome.epoch): a take in a later one drops what is left. */
  epoch: number;
  /** When the block may no longer be spent (its unused units then go back). */
  expiresAt: number;
  /** The block's `blockStart` (fixed window: its window; bucket: when the oldest of its units was taken). */
  blockStart: number;
  /** No block before this (the last take got none): decide locally until then. */
  recheckAt: number;
  /** When the last take said a block will be available (a local denial's retryAfter). */
  retryAt: number;
  /** When the key would be back to its full allowance, as the last take said. */
  resetAt: number;
  /** Units the store still had after the last take (a decision's remaining counts them too). */
  left: number;
  /** Units asked for since the last take was sent (the key's local rate). */
  demand: number;
  /** When the last take was sent; NaN before the first. */
  askedAt: number;
  taking: boolean;
  waiters: Waiter[];
}

/** A key's lease before its first take. */
export function newKeyLease(): KeyLease {
  return {
    units: 0,
    spent: 0,
    epoch: 0,
    expiresAt: 0,
    blockStart: 0,
    recheckAt: Number.NEGATIVE_INFINITY,
    retryAt: 0,
    resetAt: 0,
    left: 0,
    demand: 0,
    askedAt: Number.NaN,
    taking: false,
    waiters: [],
  };
}
