/**
 * The keys of one limiter in a {@link MemoryStore}: two generations of entries that know when
 * they expire, and the estimated bytes of each generation; the time base (and its rebase) the
 * states are kept in. The store owns the bounds and the totals over all its tables; a table adds
 * and removes its keys' share; the keys it pins (memory-pins.ts). Tables of one limit:
 * memory-single.ts and memory-kinds.ts; of several: memory-multi.ts.
 */
import type { LimitState } from "../core/algorithms/index.js";
import type { Ring } from "../core/algorithms/ring.js";
import type { Decision } from "../core/decision.js";
import { Evaluator } from "../core/evaluate.js";
import type { ResolvedLimit } from "../core/options.js";
import type { BoundStore } from "../store.js";
import { KeyIndex } from "./key-index.js";
import { PinnedKeys } from "./memory-pins.js";
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
  /** Keys pinned (memory-pins.ts), over all tables: held on top of the generations' bound, counted in `size`. */
  pinned: number;
  /** Called before a key joins a young generation and after a ring grew: turns every table when the young generations are full. */
  makeRoom(): void;
  /** A table without keys takes one: the owner holds it (and sweeps and turns it) until it has none again. */
  attach(t: Table<{ exp: number }>): void;
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
  protected young: KeyIndex<E>;
  protected old: KeyIndex<E>;
  /** A key's row (memory-rows.ts) between its generations' indexes, as `take` and `adopt` move it. */
  private readonly carry: Float64Array;
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
  /** Keys held outside the generations until released (memory-pins.ts); made by the first pin. */
  private pins: PinnedKeys<E> | undefined = undefined;
  /**
   * The store holds this table (it has keys): set by the store's `attach`, cleared when a sweep or
   * a turn leaves the table empty. A table without keys is held only by its limiters, so that it
   * goes when they do (memory.ts).
   */
  attached = false;

  constructor(
    private readonly store: TableOwner,
    limits: readonly ResolvedLimit[],
    /** Numbers each key keeps in its index's rows (memory-rows.ts); 0: none. */
    protected readonly width = 0,
  ) {
    this.ev = new Evaluator(limits);
    this.young = new KeyIndex(width);
    this.old = new KeyIndex(width);
    this.carry = new Float64Array(width);
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
    return this.young.size + this.old.size + (this.pins?.entries.size ?? 0);
  }

  /** Called before any change that could drop or move an entry (see SingleTable's last-key cache). */
  protected changed(): void {}

  reset(key: string): void {
    this.changed();
    const p = this.pins;
    const pinned = p?.entries.get(key);
    if (p !== undefined && pinned !== undefined)
      this.refresh(p, key, pinned); // held for its holders
    else {
      const e = this.take(key);
      if (e !== undefined) this.forget(key, e);
    }
  }

  /** Gives a pinned key a fresh entry (`exp` 0, as never written): it stays pinned. */
  private refresh(p: PinnedKeys<E>, key: string, e: E): void {
    const fresh = this.create();
    this.store.bytes += this.bytesOf(key, fresh) - this.bytesOf(key, e);
    p.entries.set(key, fresh);
  }

  /**
   * Before a rebase at `cut` (ms after the old base): the pinned keys that expired at or before it
   * (which a sweep would have dropped) are given fresh entries, which the shift passes by (`exp`
   * 0), so that no time of theirs moves further below the base with every rebase (small integers
   * only: memory-time.ts). Returns the pinned keys, to shift.
   */
  private refreshPins(p: PinnedKeys<E>, cut: number): KeyIndex<E> {
    const stale: Array<[string, E]> = [];
    for (const [key, e] of p.entries.entries()) if (e.exp <= cut) stale.push([key, e]);
    for (const [key, e] of stale) this.refresh(p, key, e);
    return p.entries;
  }

  /**
   * @internal Keeps `key`'s entry (a fresh one if it has none) out of the generations, so that no
   * turn drops it, until as many {@link Table.unpin} calls (memory-pins.ts). For the Redis store's
   * degraded policy, whose pins its ledger bounds.
   */
  pin(key: string): void {
    const p = (this.pins ??= new PinnedKeys(this.width));
    if (p.hold(key)) return;
    this.changed();
    let e = this.take(key);
    if (e === undefined) {
      if (!this.attached) this.store.attach(this);
      e = this.create();
      this.store.size++;
      this.store.bytes += this.bytesOf(key, e);
    }
    p.entries.set(key, e);
    if (this.width > 0) p.entries.rowIn(key, this.carry); // zeros for a fresh entry (take)
    this.store.pinned++;
  }

  /** @internal One holder of `key` fewer ({@link Table.pin}); after its last, the key joins the young generation. */
  unpin(key: string): void {
    const p = this.pins;
    if (this.width > 0 && p?.entries.has(key)) p.entries.rowOut(key, this.carry);
    const e = p?.release(key);
    if (p === undefined || e === undefined) return;
    if (p.entries.size === 0) this.pins = undefined; // its index's memory goes too
    this.changed();
    this.store.pinned--;
    this.room();
    this.join(key, e);
  }

  /** The key's pinned entry, if it is pinned. */
  private pinned(key: string): E | undefined {
    const p = this.pins;
    return p === undefined ? undefined : p.entries.get(key);
  }

  /** The pinned keys' index, if any key is pinned (memory-rows.ts finds a pinned key's row there). */
  protected pinIndex(): KeyIndex<E> | undefined {
    return this.pins?.entries;
  }

  /** Takes `key`'s entry out of its generation (still counted in the store's size and bytes), its row into `carry` (zeros if none). */
  private take(key: string): E | undefined {
    if (this.width > 0) this.carry.fill(0);
    let e = this.young.get(key);
    if (e !== undefined) {
      if (this.width > 0) this.young.rowOut(key, this.carry);
      this.young.delete(key);
      const b = this.bytesOf(key, e);
      this.youngBytes -= b;
      this.store.young--;
      this.store.youngBytes -= b;
      return e;
    }
    e = this.old.get(key);
    if (e !== undefined) {
      if (this.width > 0) this.old.rowOut(key, this.carry);
      this.old.delete(key);
      this.oldBytes -= this.bytesOf(key, e);
    }
    return e;
  }

  /** Puts an entry counted in the store's size and bytes into the young generation. */
  private join(key: string, e: E): void {
    const b = this.bytesOf(key, e);
    this.young.set(key, e);
    if (this.width > 0) this.young.rowIn(key, this.carry); // unpin's
    this.youngBytes += b;
    this.store.young++;
    this.store.youngBytes += b;
  }

  /** Takes a dropped key out of the store's totals; returns its bytes. */
  private forget(key: string, e: E): number {
    const b = this.bytesOf(key, e);
    this.store.size--;
    this.store.bytes -= b;
    return b;
  }

  /**
   * The ring of `key`'s entry (young, or pinned) grew by `delta` bytes: count them, and turn if
   * the young generations are full.
   */
  protected grew(delta: number, key: string | undefined): void {
    this.store.bytes += delta;
    if (key !== undefined && this.pinned(key) !== undefined) return;
    this.youngBytes += delta;
    this.store.youngBytes += delta;
    this.store.makeRoom();
  }

  /**
   * Before a key joins the young generation: the store's turn if the young generations are full,
   * then the store holds this table (a turn may have left it empty and let it go, the key in hand
   * counted in no generation yet).
   */
  private room(): void {
    this.store.makeRoom();
    if (!this.attached) this.store.attach(this);
  }

  /** Finds the key pinned, or in the old generation (moving it to the young one), or creates it. */
  protected adopt(key: string, now: number): E {
    const p = this.pinned(key);
    if (p !== undefined) return p;
    let e = this.old.get(key);
    let b: number;
    const moved = e !== undefined && this.width > 0;
    if (e !== undefined) {
      if (moved) this.old.rowOut(key, this.carry);
      this.old.delete(key); // still counted in size; out of old before a turn can drop it
      b = this.bytesOf(key, e);
      this.oldBytes -= b;
      if (e.exp <= now - this.base) {
        this.clear(e);
        this.carry.fill(0); // its row too (none when width is 0)
      }
      this.room();
    } else {
      this.room();
      e = this.create();
      b = this.bytesOf(key, e);
      this.store.size++;
      this.store.bytes += b;
    }
    this.young.set(key, e);
    if (moved) this.young.rowIn(key, this.carry);
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
      const gens = [this.young, this.old];
      if (this.pins !== undefined) gens.push(this.refreshPins(this.pins, cut));
      this.base += shiftEntries(this.ev.limits, gens, cut);
    }
    const rel = relTime(now, this.base);
    this.rebaseAt = nextRebase(this.ev.limits, rel);
    return rel;
  }

  /** The key's live entry (in either generation, or pinned), or undefined if absent or expired at `now`. */
  protected live(key: string, now: number): E | undefined {
    const e = this.young.get(key) ?? this.old.get(key) ?? this.pinned(key);
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
    this.young = new KeyIndex(this.width);
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
      m.compact(); // a flood's keys gone: their slots and rows too (changed() above let go of cached rows)
    }
    return dropped;
  }
}
