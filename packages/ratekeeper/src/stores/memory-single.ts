/**
 * The table of a limiter with one limit in a {@link MemoryStore}: each key is one {@link Slot}
 * (memory-table.ts has the table's generations, pins, base and rebase; the subclasses, one per
 * algorithm, are in memory-kinds.ts).
 */
import type { LimitState } from "../core/algorithms/index.js";
import type { Ring } from "../core/algorithms/ring.js";
import { newDecision, newOutcome, type Decision, type Outcome } from "../core/decision.js";
import { clearState } from "../core/evaluate.js";
import { costTooHigh, maxCostOf } from "../core/max-cost.js";
import type { ResolvedLimit } from "../core/options.js";
import { loopNowMs } from "./loop-clock.js";
import { keyBytes, ringBytes, SLOT_BYTES } from "./memory-size.js";
import { Slot, Table, type TableOwner } from "./memory-table.js";

/**
 * A limiter with one limit: each key is one {@link Slot}. The hot path of the library.
 *
 * One subclass per algorithm (memory-kinds.ts), each with a `decide` that calls its algorithm
 * directly: V8 dispatches `this.decide` by the table's hidden class and inlines the one (or the
 * few) a process uses, and an algorithm a process never runs adds no bytecode to its hot path.
 * Why that matters: V8 inlines a call chain into one optimized function only up to about 920
 * bytes of bytecode (`--max-inlined-bytecode-size-cumulative`), a denial or an admission is
 * near that (key check, clock, key lookup, algorithm, Decision), and what does not fit is a
 * real call. A switch over the algorithms (Evaluator.consume1 and its decide1) cost 270 bytes of
 * that budget whichever algorithm ran; this dispatch costs about 35 (docs/benchmarks/memory.md).
 */
export abstract class SingleTable extends Table<Slot> {
  private readonly fresh: Slot;
  /**
   * The key of the last consume and its slot, which is in the young generation (or pinned): a key decided
   * again and again (a hot key, a flood from one client) skips the hash lookup. Forgotten on
   * every change that could move or drop the slot (reset, sweep, turn).
   */
  private lastKey: string | undefined = undefined;
  private lastSlot: Slot | undefined = undefined;
  /** The limit, and the scratch outcome `decide` writes. */
  protected readonly lim: ResolvedLimit;
  protected readonly out: Outcome = newOutcome();
  /**
   * The most the limit could ever admit (core/max-cost.ts), computed once here: a larger cost is
   * refused with RateLimiter's RangeError before any key is looked up or made, one compare per
   * decision (bind() is public; RateLimiter never sends such a cost).
   */
  protected readonly maxCost: number;

  constructor(store: TableOwner, limits: readonly ResolvedLimit[], width = 0) {
    super(store, limits, width);
    this.fresh = this.create();
    this.lim = limits[0] as ResolvedLimit;
    this.maxCost = maxCostOf(limits);
  }

  /** The algorithm's check-and-commit (its `consume`) into `out`, at `nowMs` after the base; each subclass calls one (see above). */
  protected abstract decide(st: LimitState, nowMs: number, cost: number, out: Outcome, maxDelayMs: number | undefined): void;

  consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Decision {
    if (cost > this.maxCost) throw costTooHigh(cost, this.maxCost);
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now); // before the key's slot: a rebase may drop slots
    let e = this.lastSlot;
    if (key !== this.lastKey || e === undefined) e = this.slotOf(key, now);
    if (e.exp <= rel) clearState(e);
    const out = this.out;
    this.decide(e, rel, cost, out, maxDelayMs);
    // With one limit, the states matter for the decision's resetAfterMs (Evaluator's ttlMs).
    if (out.allowed) e.exp = Math.ceil(rel + out.resetAfterMs);
    return newDecision(out, this.lim, 0, undefined);
  }

  /** The key's slot (young, else adopted), remembered as the last key's. */
  private slotOf(key: string, now: number): Slot {
    const e = this.young.get(key) ?? this.adopt(key, now);
    this.lastKey = key;
    this.lastSlot = e;
    return e;
  }

  protected override changed(): void {
    this.lastKey = undefined;
    this.lastSlot = undefined;
  }

  /**
   * Counts the bytes a slot's new ring added to the old one's (none when it had none): the sliding
   * log's table (memory-kinds.ts), inside a consume, whose key is the last key's.
   */
  protected ringGrew(e: LimitState, old: Ring | null, key = this.lastKey): void {
    this.grew(ringBytes(e) - (old === null ? 0 : ringBytes({ a: 0, b: 0, ring: old })), key);
  }

  peek(key: string, cost: number, nowMs: number | undefined): Decision {
    if (cost > this.maxCost) throw costTooHigh(cost, this.maxCost);
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now);
    return this.ev.peek1(this.live(key, now) ?? this.fresh, rel, cost);
  }

  refund(key: string, cost: number, nowMs: number | undefined): void {
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now);
    const e = this.live(key, now);
    if (e !== undefined) {
      this.ev.refund([e], rel, cost);
      this.refunded(e);
    }
  }

  /** Called after a refund changed a slot's state: the sliding tables forget its last denial (memory-kinds.ts). */
  protected refunded(_e: Slot): void {}

  protected create(): Slot {
    return new Slot(this.ev.init1());
  }

  protected clear(e: Slot): void {
    clearState(e);
  }

  protected bytesOf(key: string, e: Slot): number {
    return SLOT_BYTES + keyBytes(key) + ringBytes(e);
  }
}
