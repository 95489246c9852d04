import type { ResolvedLimit } from "./options.js";
import { levelAt } from "./algorithms/bucket.js";
import { windowStart } from "./algorithms/fixed-window.js";
import type { LimitState } from "./algorithms/types.js";

/**
 * Quota leasing: an instance takes a block of a hot key's allowance from the shared state and
 * spends it locally, then gives back what it did not use. These are the two pure transitions on
 * the shared state, for the algorithms whose state is two numbers (`LimitState` a, b, exactly as
 * in fixed-window.ts and bucket.ts): fixed window, token bucket, leaky bucket (police) and GCRA.
 * `stores/redis/scripts/lease.lua` mirrors them operation for operation.
 *
 * Taking `k` units is exactly an admission of cost `k` (the counter or the bucket level moves by
 * `k`), so the shared state never admits more than the algorithm would: what is spent locally
 * was taken first. The block's size:
 * - `fair = max(1, floor(capacity / (2 * lessees)))`: no instance takes more than half its share
 *   of a full allowance at once, so the others can still take theirs;
 * - `k = min(want, fair, available)`, `want` being the instance's own demand over a block's life.
 * - Buckets refill continuously: taking a sliver each time would cost a call per unit, so a
 *   bucket with fewer than `min(want, floor(fair / 2))` (at least 1) units available gives
 *   nothing and says how long until it has them (`waitMs`). While the instances wait, the bucket
 *   fills, never past `capacity` (the waits ask for at most a quarter of it between them), so
 *   nothing is lost to the cap. A fixed window does not refill: it gives what it has.
 */
export interface BlockOutcome {
  /** Units taken (0: none available). */
  taken: number;
  /** Fixed window: ms until the window the block was taken in ends (the block must be spent before); buckets: 0 (no bound). */
  validMs: number;
  /** When nothing was taken: ms until a block may be available (the next window; the bucket's refill). */
  waitMs: number;
  /** ms until the key is back to its full allowance, as a decision's resetAfterMs. */
  resetAfterMs: number;
  /**
   * Units the shared state still had after this take (others may take them): with the block's
   * own units, what a decision reports as `remaining`.
   */
  left: number;
  /**
   * Fixed window: the start of the window the block belongs to (units go back only into it).
   * Bucket: when the block was taken (units given back later are credited less what the bucket
   * drained meanwhile, see {@link giveBack}).
   */
  blockStart: number;
  /**
   * The key's reset epoch at this take (the shared store's; {@link takeBlock} leaves it alone). A
   * reset raises it: units of a block from an earlier epoch were taken against the state the
   * reset forgot, so they are never given back into the new one (see docs/leasing.md, "A reset").
   */
  epoch: number;
}

/** A fresh scratch {@link BlockOutcome}. */
export function newBlockOutcome(): BlockOutcome {
  return { taken: 0, validMs: 0, waitMs: 0, resetAfterMs: 0, blockStart: 0, left: 0, epoch: 0 };
}

/** Whether quota leasing can hold this limit's bound (see docs/leasing.md for why the others cannot). */
export function leasable(lim: ResolvedLimit): boolean {
  return (
    lim.algorithm === "fixed-window" ||
    lim.algorithm === "token-bucket" ||
    lim.algorithm === "gcra" ||
    (lim.algorithm === "leaky-bucket" && !lim.shape)
  );
}

/** The largest block one instance takes at once, with `lessees` instances drawing on the key. */
export function fairShare(lim: ResolvedLimit, lessees: number): number {
  return Math.max(1, Math.floor(lim.capacity / (2 * Math.max(1, lessees))));
}

/**
 * Takes up to `want` units (at least 1 asked) from `s` at `nowMs` for one of `lessees` instances.
 * Fills `out`; changes `s` only when units are taken.
 */
export function takeBlock(s: LimitState, nowMs: number, want: number, lessees: number, lim: ResolvedLimit, out: BlockOutcome): void {
  const fair = fairShare(lim, lessees);
  const ask = Math.min(want, fair);
  if (lim.algorithm === "fixed-window") {
    const start = windowStart(s, nowMs, lim);
    const count = s.a === start ? s.b : 0;
    const endsIn = start + lim.windowMs - nowMs;
    const k = Math.min(ask, lim.limit - count);
    out.blockStart = start;
    out.validMs = endsIn;
    out.resetAfterMs = endsIn;
    if (k > 0) {
      s.a = start;
      s.b = count + k;
      out.taken = k;
      out.waitMs = 0;
    } else {
      out.taken = 0;
      out.waitMs = endsIn;
    }
    out.left = Math.max(0, lim.limit - count - out.taken);
    return;
  }
  // bucket.ts: the level in units x unitLevel, draining `drainPerMs` per ms.
  const W = lim.unitLevel;
  const level = levelAt(s, nowMs, lim);
  const behind = s.a > nowMs ? s.a - nowMs : 0;
  const full = lim.capacity * W;
  const available = Math.floor((full - level) / W);
  const least = Math.max(1, Math.min(want, Math.floor(fair / 2)));
  out.blockStart = nowMs;
  out.validMs = 0;
  if (available >= least) {
    const k = Math.min(ask, available);
    const after = level + k * W;
    s.b = after;
    if (behind === 0) s.a = nowMs;
    out.taken = k;
    out.waitMs = 0;
    out.resetAfterMs = Math.ceil(after / lim.drainPerMs) + behind;
    out.left = available - k;
  } else {
    out.taken = 0;
    out.waitMs = Math.ceil((level + least * W - full) / lim.drainPerMs) + behind;
    out.resetAfterMs = Math.ceil(level / lim.drainPerMs) + behind;
    out.left = Math.max(0, available);
  }
}

/**
 * Gives `units` of a block taken at `blockStart` back to `s` at `nowMs`.
 * - Fixed window: the count goes down by `units` while the block's window (`blockStart`) is still
 *   the current one; afterwards they are worth nothing.
 * - Bucket: the level goes down by `units` less what the bucket drained since the block was
 *   taken. The units raised the level when taken; had they never been taken the level would be
 *   lower by at most that, or less if the bucket has emptied meanwhile (the level stops at 0).
 *   Crediting `units x unitLevel - elapsed x drainPerMs` (bucket.ts's units) never gives back
 *   more than the units still account for, so the bucket's bound holds (a plain refund of the
 *   units would not).
 */
export function giveBack(s: LimitState, nowMs: number, units: number, blockStart: number, lim: ResolvedLimit): void {
  if (lim.algorithm === "fixed-window") {
    if (s.a === blockStart && windowStart(s, nowMs, lim) === blockStart) s.b = Math.max(0, s.b - units);
    return;
  }
  const credit = units * lim.unitLevel - Math.max(0, nowMs - blockStart) * lim.drainPerMs;
  if (credit <= 0) return;
  s.b = Math.max(0, levelAt(s, nowMs, lim) - credit);
  s.a = Math.max(nowMs, s.a);
}
