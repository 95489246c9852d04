/**
 * The keys of one limiter in a {@link MemoryStore}: two generations of entries that know when
 * they expire, and the estimated bytes of each generation; the time base (and its rebase) the
 * states are kept in. The store owns the bounds and the totals over all its tables; a table adds
 * and removes its keys' share. Tables of one limit: here and memory-kinds.ts; of several: memory-multi.ts.
 */
import type { LimitState } from "../core/algorithms/index.js";
import type { Ring } from "../core/algorithms/ring.js";
import { newDecision, newOutcome, type Decision, type Outcome } from "../core/decision.js";
import { clearState, Evaluator } from "../core/evaluate.js";
import type { ResolvedLimit } from "../core/options.js";
import type { BoundStore } from "../store.js";
import { KeyIndex } from "./key-index.js";
import { loopNowMs } from "./loop-clock.js";
import { keyBytes, ringBytes, SLOT_BYTES } from "./memory-size.js";
import { nextRebase, REBASE_AT, shiftEntries } from "./memory-rebase.js";
import { baseFor, BEFORE_FIRST, relTime } from "./memory-time.js";

/** What a table updates in the store that owns it: the totals over every table, and the turn. */
export interface TableOwner {
  /** Keys held, over all tables. */
  size: number;
  /** Keys in the young generations. */
  young: number;
  /** Estimated bytes held, and those of the young generations. */
  bytes: number;
  youngBytes: number;
  /** Called before a key joins a young generation and after a ring grew: turns every table when the young generations are full. */
  makeRoom(): void;
}

/**
 * One limit's state for one key, and (for a limiter with one limit) when the key stops mattering.
 * With one limit the slot is the whole entry, so a decision follows one pointer from the map, not
 * three (entry, array, state). Every state in the store is a Slot, so the algorithms see one shape.
 */
export class Slot implements LimitState {
  a = 0;
  b = 0;
  ring: Ring | null;
  /** When the key's states equal fresh ones again, in ms after the table's `base`; 0 = never written. */
  exp = 0;
  constructor(fresh: LimitState) {
    this.a = fresh.a;
    this.b = fresh.b;
    this.ring = fresh.ring;
  }
}

/**
 * The keys of one limiter in a {@link MemoryStore}: two generations (see MemoryStore) of entries
 * that know when they expire. Subclasses hold one slot per key (one limit) or an entry of slots.
 */
export abstract class Table<E extends { exp: number }> implements BoundStore {
  protected young = new KeyIndex<E>();
  protected old = new KeyIndex<E>();
  /** Estimated bytes of each generation. */
  private youngBytes = 0;
  private oldBytes = 0;
  protected readonly ev: Evaluator;
  /**
   * The origin of the times this table hands its algorithms and keeps in `exp`, so that they are
   * small integers (V8 keeps those in the slot, not in a heap-number box each): 2^30 ms before its
   * first reading, then moved forward by each rebase (memory-time.ts: why decisions do not change,
   * and the limits). `exp` goes through `Math.ceil`, which changes no value (times are whole ms).
   */
  protected base = 0;
  /** A reading more than this after the base rebases first (memory-rebase.ts); the first reading sets the base. */
  private rebaseAt = REBASE_AT;
  /** A limiter binds it with an injected clock: the store's sweep timer (process clock) passes it by. */
  injectedClock = false;

  constructor(
    private readonly store: TableOwner,
    limits: readonly ResolvedLimit[],
  ) {
    this.ev = new Evaluator(limits);
  }

  abstract consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Decision;
  abstract peek(key: string, cost: number, nowMs: number | undefined): Decision;
  abstract refund(key: string, cost: number, nowMs: number | undefined): void;
  /** A fresh entry. */
  protected abstract create(): E;
  /** Resets an expired entry in place to fresh states. */
  protected abstract clear(e: E): void;
  /** Estimated bytes of the key and its entry (stores/memory-size.ts). */
  protected abstract bytesOf(key: string, e: E): number;

  get held(): number {
    return this.young.size + this.old.size;
  }

  /** Called before any change that could drop or move an entry (see SingleTable's last-key cache). */
  protected changed(): void {}

  reset(key: string): void {
    this.changed();
    let e = this.young.get(key);
    if (e !== undefined) {
      this.young.delete(key);
      const b = this.forget(key, e);
      this.youngBytes -= b;
      this.store.young--;
      this.store.youngBytes -= b;
      return;
    }
    e = this.old.get(key);
    if (e !== undefined) {
      this.old.delete(key);
      this.oldBytes -= this.forget(key, e);
    }
  }

  /** Takes a dropped key out of the store's totals; returns its bytes. */
  private forget(key: string, e: E): number {
    const b = this.bytesOf(key, e);
    this.store.size--;
    this.store.bytes -= b;
    return b;
  }

  /** A young entry's ring grew by `delta` bytes: count them, and turn if the young generations are full. */
  protected grew(delta: number): void {
    this.youngBytes += delta;
    this.store.bytes += delta;
    this.store.youngBytes += delta;
    this.store.makeRoom();
  }

  /** Finds the key in the old generation (moving it to the young one) or creates it. */
  protected adopt(key: string, now: number): E {
    let e = this.old.get(key);
    let b: number;
    if (e !== undefined) {
      this.old.delete(key); // still counted in size; out of old before a turn can drop it
      b = this.bytesOf(key, e);
      this.oldBytes -= b;
      if (e.exp <= now - this.base) this.clear(e);
      this.store.makeRoom();
    } else {
      this.store.makeRoom();
      e = this.create();
      b = this.bytesOf(key, e);
      this.store.size++;
      this.store.bytes += b;
    }
    this.young.set(key, e);
    this.youngBytes += b;
    this.store.young++;
    this.store.youngBytes += b;
    return e;
  }

  /** `now` in ms after the base, which the first reading sets and a reading past `rebaseAt` moves forward first. */
  protected relOf(now: number): number {
    const rel = relTime(now, this.base);
    return rel > this.rebaseAt ? this.rebase(now) : rel;
  }

  /**
   * Sets the base of a table without keys, else moves it forward (memory-rebase.ts): `now` is the
   * newest reading (every one before it was at most `rebaseAt`). Keys that expired 2^30 ms before
   * it matter only to readings before that: dropped. Returns `now` after the new base.
   */
  private rebase(now: number): number {
    if (this.held === 0) this.base = baseFor(this.ev.limits, now);
    else {
      const cut = now - this.base - BEFORE_FIRST;
      this.sweep(this.base + cut);
      this.base += shiftEntries(this.ev.limits, [this.young, this.old], cut);
    }
    const rel = relTime(now, this.base);
    this.rebaseAt = nextRebase(this.ev.limits, rel);
    return rel;
  }

  /** The key's live entry in either generation, or undefined if absent or expired at `now`. */
  protected live(key: string, now: number): E | undefined {
    const e = this.young.get(key) ?? this.old.get(key);
    return e !== undefined && e.exp > now - this.base ? e : undefined;
  }

  /** Drops the old generation; the young one becomes old. */
  turn(): void {
    this.changed();
    this.store.size -= this.old.size;
    this.store.bytes -= this.oldBytes;
    this.oldBytes = this.youngBytes;
    this.youngBytes = 0;
    this.old = this.young;
    this.young = new KeyIndex();
  }

  sweep(nowMs: number): number {
    this.changed();
    let dropped = 0;
    const rel = nowMs - this.base;
    for (const m of [this.old, this.young]) {
      m.deleteWhere((k, e) => {
        if (e.exp > rel) return false;
        dropped++;
        const b = this.forget(k, e);
        if (m === this.young) {
          this.youngBytes -= b;
          this.store.young--;
          this.store.youngBytes -= b;
        } else this.oldBytes -= b;
        return true;
      });
    }
    return dropped;
  }
}

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
   * The key of the last consume and its slot, which is in the young generation: a key decided
   * again and again (a hot key, a flood from one client) skips the hash lookup. Forgotten on
   * every change that could move or drop the slot (reset, sweep, turn).
   */
  private lastKey: string | undefined = undefined;
  private lastSlot: Slot | undefined = undefined;
  /** The limit, and the scratch outcome `decide` writes. */
  protected readonly lim: ResolvedLimit;
  private readonly out: Outcome = newOutcome();

  constructor(store: TableOwner, limits: readonly ResolvedLimit[]) {
    super(store, limits);
    this.fresh = this.create();
    this.lim = limits[0] as ResolvedLimit;
  }

  /** The algorithm's check-and-commit (its `consume`) into `out`, at `nowMs` after the base; each subclass calls one (see above). */
  protected abstract decide(st: LimitState, nowMs: number, cost: number, out: Outcome, maxDelayMs: number | undefined): void;

  consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Decision {
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

  /** Counts the bytes a slot's new ring added to the old one's (none when it had none): the sliding log's table (memory-kinds.ts). */
  protected ringGrew(e: LimitState, old: Ring | null): void {
    this.grew(ringBytes(e) - (old === null ? 0 : ringBytes({ a: 0, b: 0, ring: old })));
  }

  peek(key: string, cost: number, nowMs: number | undefined): Decision {
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
