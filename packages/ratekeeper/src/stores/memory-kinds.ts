/**
 * The memory store's tables of one limit, one class per algorithm (see SingleTable): each
 * `decide` calls its algorithm's fused check-and-commit directly, so that V8 dispatches by the
 * table's hidden class and inlines only the algorithms a process runs.
 */
import { decideBucket } from "../core/algorithms/bucket.js";
import { decideFixed } from "../core/algorithms/fixed-window.js";
import { ALGORITHM_IMPLS, type Algorithm, type LimitState } from "../core/algorithms/index.js";
import { slidingLog } from "../core/algorithms/sliding-log.js";
import { decideTail } from "../core/algorithms/sliding-tail.js";
import type { Outcome } from "../core/decision.js";
import type { ResolvedLimit } from "../core/options.js";
import { SingleTable, type TableOwner } from "./memory-table.js";

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
 * Sliding log. Its ring may be replaced by a longer one (sliding-log.ts grow()), whose bytes the
 * store counts: checked here rather than in SingleTable.consume, so that the other algorithms'
 * hot path carries no byte of it (see SingleTable on V8's inlining budget).
 */
class LogTable extends SingleTable {
  protected decide(st: LimitState, nowMs: number, cost: number, out: Outcome): void {
    const ring = st.ring;
    slidingLog.consume(st, nowMs, cost, this.lim, out);
    if (st.ring !== ring) this.ringGrew(st, ring);
  }
}

/** Sliding window of several sub-windows. */
class AnyTable extends SingleTable {
  private readonly alg: Algorithm = ALGORITHM_IMPLS[this.lim.algorithm];

  protected decide(st: LimitState, nowMs: number, cost: number, out: Outcome, maxDelayMs: number | undefined): void {
    this.alg.consume(st, nowMs, cost, this.lim, out, maxDelayMs);
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
      return lim.buckets === 1 ? new TailTable(store, limits) : new AnyTable(store, limits);
    case "sliding-log":
      return new LogTable(store, limits);
  }
}
