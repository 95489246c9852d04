/**
 * The memory store's tables of one limit, one class per algorithm (see SingleTable): each
 * `decide` calls its algorithm's fused check-and-commit directly, so that V8 dispatches by the
 * table's hidden class and inlines only the algorithms a process runs.
 */
import { decideBucket } from "../core/algorithms/bucket.js";
import { decideFixed } from "../core/algorithms/fixed-window.js";
import type { LimitState } from "../core/algorithms/index.js";
import { slidingLog } from "../core/algorithms/sliding-log.js";
import { decideTail } from "../core/algorithms/sliding-tail.js";
import { decideRing } from "../core/algorithms/sliding-window.js";
import type { Outcome } from "../core/decision.js";
import type { ResolvedLimit } from "../core/options.js";
import { SingleTable } from "./memory-single.js";
import { Slot, type TableOwner } from "./memory-table.js";
import { DENIAL_BYTES } from "./memory-size.js";

/** Fixed window. */
class FixedTable extends SingleTable {
  protected decide(st: LimitState, nowMs: number, cost: number, out: Outcome): void {
    decideFixed(st, nowMs, cost, this.lim, out, true);
  }
}

/** Token bucket, leaky bucket, GCRA. */
class BucketTable extends SingleTable {
  protected decide(st: LimitState, nowMs: number, cost: number, out: Outcome, maxDelayMs: number | undefined): void {
    decideBucket(st, nowMs, cost, this.lim, out, true, maxDelayMs);
  }
}

/** Sliding window of one sub-window (the default). */
class TailTable extends SingleTable {
  protected decide(st: LimitState, nowMs: number, cost: number, out: Outcome): void {
    decideTail(st, nowMs, cost, this.lim, out, true);
  }
}

/**
 * A slot that remembers its key's last denial of one unit, for the sliding tables below: when the
 * same key asks again before that denial's retry time, with nothing admitted or refunded since,
 * the answer is known without reading the ring (over many keys, reading it is a cache miss or two
 * per decision, most of what a denial cost there: docs/benchmarks/memory.md). Why it is exact:
 * with no admission the count of these algorithms never grows with time, and their waits are
 * exact (sliding-denial.test.ts), so the earliest time one unit fits (`retry` after the denial)
 * and the time the whole limit is back (`reset` after it) stay the same instants: asked again at
 * `t`, the algorithm answers those instants less `t`, and `remaining` 0 (a denial of one unit
 * leaves none). That holds for a clock that stepped back too: these algorithms decide such a
 * reading as at their newest time and count the waits from the reading (sliding-window.ts,
 * sliding-log.ts), which again gives the same instants. Both instants are kept as their distance
 * before `exp` (which only an admission moves; an admission forgets the denial, as a refund
 * does), as small integers, so they add no number boxes: 16 bytes a key.
 */
class DenialSlot extends Slot {
  /** `exp` less the time one unit fits again, in ms; -1: no denial remembered. */
  retryBeforeExp = -1;
  /** `exp` less the time the whole limit is back, in ms. */
  resetBeforeExp = 0;
}

/** Distances kept as small integers only (see DenialSlot): 2^30 ms is about 12 days. */
const MAX_KEPT = 0x3fffffff;

/** The sliding tables: each decision of one unit first looks at the key's last denial (DenialSlot). */
abstract class DenialTable extends SingleTable {
  /** The algorithm's own decision (its fused check-and-commit). */
  protected abstract decideNew(st: LimitState, nowMs: number, cost: number, out: Outcome): void;

  /** `rel`: ms after the table's base, as every time SingleTable hands its algorithms (memory-time.ts). */
  protected decide(st: LimitState, rel: number, cost: number, out: Outcome): void {
    const s = st as DenialSlot;
    if (cost === 1 && s.retryBeforeExp >= 0) {
      const retry = s.exp - s.retryBeforeExp - rel;
      if (retry > 0) {
        out.allowed = false;
        out.remaining = 0;
        out.retryAfterMs = retry;
        out.resetAfterMs = s.exp - s.resetBeforeExp - rel;
        out.delayMs = 0;
        return;
      }
    }
    this.decideNew(st, rel, cost, out);
    if (out.allowed) s.retryBeforeExp = -1;
    else if (cost === 1) remember(s, rel, out);
  }

  protected override create(): Slot {
    return new DenialSlot(this.ev.init1());
  }

  protected override refunded(e: Slot): void {
    (e as DenialSlot).retryBeforeExp = -1;
  }

  protected override bytesOf(key: string, e: Slot): number {
    return super.bytesOf(key, e) + DENIAL_BYTES;
  }
}

/** Keeps a denial of one unit at `rel` (ms after the table's base) in its slot, when it fits (see DenialSlot). */
function remember(s: DenialSlot, rel: number, out: Outcome): void {
  const retryBefore = s.exp - rel - out.retryAfterMs;
  const resetBefore = s.exp - rel - out.resetAfterMs;
  if (retryBefore >= 0 && resetBefore >= 0 && retryBefore <= MAX_KEPT && resetBefore <= MAX_KEPT) {
    s.retryBeforeExp = retryBefore | 0;
    s.resetBeforeExp = resetBefore | 0;
  } else s.retryBeforeExp = -1;
}

/**
 * Sliding log. Its ring may be replaced by a longer one (sliding-log.ts grow()), whose bytes the
 * store counts: checked here rather than in SingleTable.consume, so that the other algorithms'
 * hot path carries no byte of it (see SingleTable on V8's inlining budget).
 */
class LogTable extends DenialTable {
  protected decideNew(st: LimitState, nowMs: number, cost: number, out: Outcome): void {
    const ring = st.ring;
    slidingLog.consume(st, nowMs, cost, this.lim, out);
    if (st.ring !== ring) this.ringGrew(st, ring);
  }
}

/** Sliding window of several sub-windows. */
class RingTable extends DenialTable {
  protected decideNew(st: LimitState, nowMs: number, cost: number, out: Outcome): void {
    decideRing(st, nowMs, cost, this.lim, out);
  }
}

/** The table of a limiter with one limit. */
export function singleTable(store: TableOwner, limits: readonly ResolvedLimit[]): SingleTable {
  const lim = limits[0] as ResolvedLimit;
  switch (lim.algorithm) {
    case "fixed-window":
      return new FixedTable(store, limits);
    case "token-bucket":
    case "leaky-bucket":
    case "gcra":
      return new BucketTable(store, limits);
    case "sliding-window":
      return lim.buckets === 1 ? new TailTable(store, limits) : new RingTable(store, limits);
    case "sliding-log":
      return new LogTable(store, limits);
  }
}
