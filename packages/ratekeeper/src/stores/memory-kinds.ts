/**
 * The memory store's tables of one limit, one class per algorithm (see SingleTable): each
 * `decide` calls its algorithm's fused check-and-commit directly, so that V8 dispatches by the
 * table's hidden class and inlines only the algorithms a process runs.
 */
import { decideBucket } from "../core/algorithms/bucket.js";
import { decideFixed } from "../core/algorithms/fixed-window.js";
import type { LimitState } from "../core/algorithms/index.js";
import { consumeIn, FIRST_CAPACITY, slidingLog } from "../core/algorithms/sliding-log.js";
import { decideTail, decideTailRow, PACKED_MAX_LIMIT } from "../core/algorithms/sliding-tail.js";
import { newRing, SMALL_RING, type Ring } from "../core/algorithms/ring.js";
import { decideRing } from "../core/algorithms/sliding-window.js";
import { newDecision, type Decision, type Outcome } from "../core/decision.js";
import { clearState } from "../core/evaluate.js";
import { costTooHigh } from "../core/max-cost.js";
import type { ResolvedLimit } from "../core/options.js";
import type { KeyIndex } from "./key-index.js";
import { loopNowMs } from "./loop-clock.js";
import { decideRow, withRing } from "./memory-rows.js";
import { SingleTable } from "./memory-single.js";
import { Slot, type TableOwner } from "./memory-table.js";
import { DENIAL_BYTES, ROW_BYTES } from "./memory-size.js";

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

/** Sliding window of one sub-window (the default) whose two counts pack into `b` (sliding-tail.ts); others take TailRowTable. */
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

/** A fresh state without a ring: a RowTable's keys keep their counts in rows. */
const ROWLESS = { a: 0, b: 0, ring: null };

/** The rows of no index: what RowTable holds until its next consume finds the last key's. */
const NO_ROWS = new Float64Array(0);

/**
 * Sliding window of several sub-windows (up to 62: a ring of at most SMALL_RING numbers), each
 * key's ring counts in its index's rows (memory-rows.ts); its own consume, which finds the row by
 * the key's entry number, and peek and refund, which lend the state a ring copied from the row.
 */
class RowTable extends DenialTable {
  /**
   * The last consumed key, its slot and its row (its index's rows, young or pinned, and the offset
   * there), which decideNew reads; forgotten on every change that could move an entry (SingleTable's).
   * Between changes no index grows but by the adoption of a key, which makes that key the last.
   */
  private rowKey: string | undefined = undefined;
  private rowSlot: Slot | undefined = undefined;
  protected rows: Float64Array = NO_ROWS;
  protected off = 0;
  /** The ring lent to a state whose decision is not the fast one (memory-rows.ts). */
  private readonly tmp: Ring;

  /**
   * `width`: the numbers of a key's row, its ring's (a window's `buckets + 2` by default); `tmp`:
   * the ring lent (a Float64Array for the sliding log, whose rings are all of that kind).
   */
  constructor(store: TableOwner, limits: readonly ResolvedLimit[], width = (limits[0] as ResolvedLimit).buckets + 2, tmp?: Ring) {
    super(store, limits, width);
    this.tmp = tmp ?? newRing(this.width);
  }

  override consume(key: string, cost: number, nowMs: number | undefined): Decision {
    if (cost > this.maxCost) throw costTooHigh(cost, this.maxCost);
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now); // before the key's row: a rebase may drop keys
    let e = this.rowSlot;
    if (key !== this.rowKey || e === undefined) e = this.rowOf(key, now);
    if (e.exp <= rel) {
      clearState(e);
      for (let i = this.off; i < this.off + this.width; i++) this.rows[i] = 0;
    }
    const out = this.out;
    this.decide(e, rel, cost, out);
    if (out.allowed) e.exp = Math.ceil(rel + out.resetAfterMs);
    return newDecision(out, this.lim, 0, undefined);
  }

  /** The slot of `key` (young, else adopted; or pinned), remembered with its row as the last key's. */
  private rowOf(key: string, now: number): Slot {
    let ix = this.young;
    let n = ix.entryOf(key);
    if (n < 0) {
      this.adopt(key, now);
      ix = this.young; // adopt may have turned the generations: another index then
      n = ix.entryOf(key);
      if (n < 0) {
        ix = this.pinIndex() as KeyIndex<Slot>;
        n = ix.entryOf(key);
      }
    }
    const e = ix.valAt(n);
    this.rowKey = key;
    this.rowSlot = e;
    this.rows = ix.rows;
    this.off = n * this.width;
    return e;
  }

  protected override changed(): void {
    super.changed();
    this.rowKey = undefined;
    this.rowSlot = undefined;
    this.rows = NO_ROWS; // the index may make new rows (a sweep's compaction): let the old ones go
  }

  /** Counts a slot's new ring (a sliding log's that outgrew its row, or grew again) for the last consumed key. */
  protected grewAt(e: LimitState, old: Ring | null): void {
    this.ringGrew(e, old, this.rowKey);
  }

  protected decideNew(st: LimitState, nowMs: number, cost: number, out: Outcome): void {
    decideRow(st, this.rows, this.off, nowMs, cost, this.lim, out, this.tmp as number[]);
  }

  /** Runs `f` on `key`'s live state (as Table.live finds it) with its row lent as its ring; undefined if none. */
  private onLive<T>(key: string, now: number, f: (s: Slot) => T): T | undefined {
    for (const ix of [this.young, this.old, this.pinIndex()]) {
      const n = ix === undefined ? -1 : ix.entryOf(key);
      if (ix === undefined || n < 0) continue;
      const s = ix.valAt(n);
      if (s.exp <= now - this.base) return undefined;
      // A sliding log's state whose ring outgrew its row has a ring of its own (LogRowTable).
      return s.ring !== null ? f(s) : withRing(s, ix.rows, n * this.width, this.tmp, () => f(s));
    }
    return undefined;
  }

  override peek(key: string, cost: number, nowMs: number | undefined): Decision {
    if (cost > this.maxCost) throw costTooHigh(cost, this.maxCost);
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now);
    const d = this.onLive(key, now, (s) => this.ev.peek1(s, rel, cost));
    if (d !== undefined) return d;
    const fresh = this.create();
    return withRing(fresh, new Float64Array(this.width), 0, this.tmp, () => this.ev.peek1(fresh, rel, cost));
  }

  override refund(key: string, cost: number, nowMs: number | undefined): void {
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now);
    this.onLive(key, now, (s) => {
      this.ev.refund([s], rel, cost);
      this.refunded(s);
    });
  }

  protected override create(): Slot {
    return new DenialSlot(ROWLESS);
  }

  protected override bytesOf(key: string, e: Slot): number {
    return super.bytesOf(key, e) + ROW_BYTES * this.width;
  }
}

/**
 * Sliding window of one sub-window whose counts do not pack (a limit above PACKED_MAX_LIMIT): its
 * two counts in a row of two numbers, as the ring's layout (sliding-tail.ts), rather than in a ring
 * array of the key's state: over many keys in no order, that array and its elements were two cache
 * misses more per decision than the packed state's (docs/benchmarks/memory.md).
 */
class TailRowTable extends RowTable {
  constructor(store: TableOwner, limits: readonly ResolvedLimit[]) {
    super(store, limits, 2);
  }

  protected override decideNew(st: LimitState, nowMs: number, cost: number, out: Outcome): void {
    decideTailRow(st, this.rows, this.off, nowMs, cost, this.lim, out);
  }
}

/**
 * Sliding log, each key's first ring (`min(limit, FIRST_CAPACITY) + 1` numbers: its times and its
 * high-water mark, sliding-log.ts) in a row of its index, so that over many keys the ring's
 * address comes from the key's entry number, not from its state (two dependent cache misses
 * fewer: the Float64Array object, then its data). A ring that must grow past the row is copied
 * into one of the state's own (sliding-log.ts grow()), which the key keeps from then on, as
 * LogTable's keys do; its bytes are counted here, as LogTable counts a grown ring's.
 */
class LogRowTable extends RowTable {
  constructor(store: TableOwner, limits: readonly ResolvedLimit[]) {
    const width = Math.min((limits[0] as ResolvedLimit).limit, FIRST_CAPACITY) + 1;
    super(store, limits, width, new Float64Array(width));
  }

  protected override decideNew(st: LimitState, nowMs: number, cost: number, out: Outcome): void {
    const ring = st.ring as Float64Array | null;
    if (ring === null) consumeIn(st, this.rows, this.off, this.width - 1, nowMs, cost, this.lim, out);
    else consumeIn(st, ring, 0, ring.length - 1, nowMs, cost, this.lim, out);
    if (st.ring !== ring) this.grewAt(st, ring);
  }
}

/** The table of a limiter with one limit. `rows` false: @internal rings as objects, the reference of memory-rows.test.ts. */
export function singleTable(store: TableOwner, limits: readonly ResolvedLimit[], rows = true): SingleTable {
  const lim = limits[0] as ResolvedLimit;
  switch (lim.algorithm) {
    case "fixed-window":
      return new FixedTable(store, limits);
    case "token-bucket":
    case "leaky-bucket":
    case "gcra":
      return new BucketTable(store, limits);
    case "sliding-window":
      if (lim.buckets === 1) return rows && lim.limit > PACKED_MAX_LIMIT ? new TailRowTable(store, limits) : new TailTable(store, limits);
      return rows && lim.buckets + 2 <= SMALL_RING ? new RowTable(store, limits) : new RingTable(store, limits);
    case "sliding-log":
      return rows ? new LogRowTable(store, limits) : new LogTable(store, limits);
  }
}
