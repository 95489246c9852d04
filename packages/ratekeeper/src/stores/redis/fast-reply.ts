import { ALGORITHM_IMPLS, type LimitState } from "../../core/algorithms/index.js";
import type { Outcome } from "../../core/decision.js";
import type { ResolvedLimit } from "../../core/options.js";
import { logOutcome } from "../../core/algorithms/sliding-log.js";
import { newRing } from "../../core/algorithms/ring.js";
import { counterState } from "./counter.js";

/** Algorithms the script's fast path serves: those whose state is two numbers (a, b), the sliding window (a and its ring), the sliding log. */
export const FAST_ALGORITHMS: ReadonlySet<string> = new Set([
  "fixed-window",
  "token-bucket",
  "leaky-bucket",
  "gcra",
  "sliding-window",
  "sliding-log",
]);

/**
 * The largest sliding-log limit whose fast path (ratekeeper.lua kind "l") reads and rewrites the
 * key's whole value (24 + 8 * limit bytes at most) with one GET and one SET; larger logs (kind
 * "L") are read and written by ranges, as the general code does: a whole ring of 1,000 cost
 * Redis 54 us per decision against 15 for the ranges (docs/benchmarks/redis.md).
 */
export const LOG_WHOLE_MAX = 128;

/**
 * `lim` with a bucket's level in the units the scripts keep it in, `cost x windowMs` (they have
 * no `gcd`): for {@link fastOutcome}, which decides on the script's own state. The decisions are
 * those of `lim` (algorithms/bucket.ts); only the unit of the level differs.
 */
export function scriptLimit(lim: ResolvedLimit): ResolvedLimit {
  return { ...lim, unitLevel: lim.windowMs, drainPerMs: lim.limit };
}

/**
 * The outcome of a fast-path call (ratekeeper.lua, modes "C" and "P"), from the state the script
 * decided on: the key's value before the call (12 bytes: two 6-byte little-endian integers; 16:
 * two doubles) or null for a fresh key; in the counter layout (kind "n", counter.ts), the integer
 * value the decision saw; for the sliding log (kind "l"), not its state but the numbers check()
 * reads of it (logReply). The script decided with the same arithmetic as
 * `check` (and wrote `commit`'s state when it admitted), so `check` on that state at the same
 * time and cost gives the very numbers the general path's reply would carry. `lim`: the limit
 * in the script's units ({@link scriptLimit}).
 * @throws Error when the value is not a state the script writes
 */
export function fastOutcome(raw: unknown, lim: ResolvedLimit, nowMs: number, cost: number, out: Outcome, maxDelayMs?: number): void {
  if (lim.algorithm === "sliding-window") return windowOutcome(raw, lim, nowMs, cost, out);
  if (lim.algorithm === "sliding-log") return logReply(raw, lim, nowMs, cost, out);
  const s: LimitState = { a: 0, b: 0, ring: null };
  if (typeof raw === "number") counterState(raw, nowMs, lim, s);
  else if (raw !== null && raw !== undefined) {
    if (!Buffer.isBuffer(raw)) throw new Error(`expected the state as bytes, got ${typeof raw}`);
    if (raw.length === 12) {
      s.a = raw.readIntLE(0, 6);
      s.b = raw.readIntLE(6, 6);
    } else if (raw.length === 16) {
      s.a = raw.readDoubleLE(0);
      s.b = raw.readDoubleLE(8);
    } else throw new Error(`a state of ${raw.length} bytes`);
  }
  ALGORITHM_IMPLS[lim.algorithm].check(s, nowMs, cost, lim, out, maxDelayMs);
}

/**
 * The sliding window's outcome from its state as the script stored it (ratekeeper.lua encode():
 * `a`, then `buckets + 1` counts, as 6-byte integers or, when one is not a whole number below
 * 2^47, as doubles), or null for a fresh key.
 */
function windowOutcome(raw: unknown, lim: ResolvedLimit, nowMs: number, cost: number, out: Outcome): void {
  const n = lim.buckets + 2;
  const ring = newRing(lim.buckets + 1);
  const s: LimitState = { a: 0, b: 0, ring };
  if (raw !== null && raw !== undefined) {
    if (!Buffer.isBuffer(raw)) throw new Error(`expected the state as bytes, got ${typeof raw}`);
    const width = raw.length === 6 * n ? 6 : raw.length === 8 * n ? 8 : 0;
    if (width === 0) throw new Error(`a state of ${raw.length} bytes`);
    const read = (k: number) => (width === 6 ? raw.readIntLE(6 * k, 6) : raw.readDoubleLE(8 * k));
    s.a = read(0);
    for (let j = 0; j <= lim.buckets; j++) ring[j] = read(j + 1);
  }
  ALGORITHM_IMPLS["sliding-window"].check(s, nowMs, cost, lim, out);
}

/**
 * The sliding log's outcome from the fast path's reply (ratekeeper.lua kind "l"): the integer
 * `free` (an admission at now), or [free, newest, decider], the numbers sliding-log.ts check()
 * reads of the log, which the script read of the key (for an admission made as at the log's
 * high-water mark, newest is that time; for a denial, the newest unit's).
 */
function logReply(raw: unknown, lim: ResolvedLimit, nowMs: number, cost: number, out: Outcome): void {
  if (typeof raw === "number") return logOutcome(raw, nowMs, 0, nowMs, cost, lim, out);
  if (!Array.isArray(raw) || raw.length !== 3 || !raw.every((x) => typeof x === "number"))
    throw new Error(`expected the log's numbers, got ${typeof raw}`);
  logOutcome(raw[0] as number, raw[1] as number, raw[2] as number, nowMs, cost, lim, out);
}
