import type { LimitState } from "../core/algorithms/index.js";
import type { Decision } from "../core/decision.js";
import { describe } from "../core/duration.js";
import { RateLimitConfigError } from "../core/errors.js";
import { clearState, Evaluator } from "../core/evaluate.js";
import type { ResolvedLimit } from "../core/options.js";
import { policyId } from "../core/policy-id.js";
import type { BoundStore, Store } from "../store.js";
import { loopNowMs } from "./loop-clock.js";

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * The most keys held at once, over every limiter sharing the store. Keys not used for the
   * longest (roughly: not touched during the last `maxKeys / 2` new keys) are dropped first; a
   * flood of one-off keys cannot grow memory past this.
   * @default 1_000_000
   */
  maxKeys?: number;
  /**
   * How often expired keys are swept (ms), by a timer that never keeps the process alive.
   * Expired keys are also treated as new on their next use, so this only returns memory sooner.
   * `0` turns the sweep off.
   * @default 60_000
   */
  sweepIntervalMs?: number;
}

/**
 * One limit's state for one key, and (for a limiter with one limit) when the key stops mattering.
 * With one limit the slot is the whole entry, so a decision follows one pointer from the map, not
 * three (entry, array, state). Every state in the store is a Slot, so the algorithms see one shape.
 */
class Slot implements LimitState {
  a = 0;
  b = 0;
  ring: Float64Array | null;
  /** When the key's states equal fresh ones again, in ms after the table's `base`; 0 = never written. */
  exp = 0;
  constructor(fresh: LimitState) {
    this.a = fresh.a;
    this.b = fresh.b;
    this.ring = fresh.ring;
  }
}

/** One key's states, one per limit, and when they stop mattering (limiters with several limits). */
class Entry {
  /** As {@link Slot.exp}. */
  exp = 0;
  constructor(readonly s: Slot[]) {}
}

/**
 * The embedded, bounded in-memory store: the default when a limiter is given no store.
 * Runs the core algorithms over plain maps, synchronously; exact within one process.
 *
 * Bounded by `maxKeys` with two generations: keys live in `young`; when the young generations
 * (over every limiter sharing the store) hold `maxKeys / 2` keys, every `old` (keys not used since
 * the previous turn) is dropped and `young` becomes `old`. A key used again moves back to `young`.
 * So a key used at least once per `maxKeys / 2` new keys stays, and `old + young <= maxKeys`.
 *
 * Time: the limiter's injected clock, else `Date.now()` read once per turn of the event loop and
 * shared by the decisions of that turn (at most 16 per reading), like the loop's own clock that
 * timers run on; a replaced `Date.now` (fake timers) is read on every call (see loop-clock.ts).
 * @example
 * const store = new MemoryStore({ maxKeys: 100_000 });
 * const limiter = new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", store });
 */
export class MemoryStore implements Store {
  readonly maxKeys: number;
  private readonly tables = new Set<Table<Slot | Entry>>();
  private readonly byNamespace = new Map<string, Table<Slot | Entry>>();
  private timer: ReturnType<typeof setInterval> | undefined;
  /** Keys held now, over all tables. */
  size = 0;
  /** Keys in the young generations, over all tables. */
  young = 0;
  /** Young keys that trigger a turn: the old generations never hold more, so size <= maxKeys. */
  private readonly half: number;

  constructor(options: MemoryStoreOptions = {}) {
    const maxKeys = options.maxKeys ?? 1_000_000;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 2) {
      throw new RateLimitConfigError([{ path: "maxKeys", message: `must be a whole number >= 2 (got ${describe(options.maxKeys)})` }]);
    }
    const sweep = options.sweepIntervalMs ?? 60_000;
    if (!Number.isSafeInteger(sweep) || sweep < 0) {
      throw new RateLimitConfigError([
        { path: "sweepIntervalMs", message: `must be a whole number >= 0 (got ${describe(options.sweepIntervalMs)})` },
      ]);
    }
    this.maxKeys = maxKeys;
    this.half = Math.floor(maxKeys / 2);
    if (sweep > 0) {
      this.timer = setInterval(() => this.sweep(Date.now()), sweep);
      this.timer.unref?.();
    }
  }

  /**
   * Limiters bound with the same namespace and the same limits share one table, as they share
   * keys in Redis (and a limiter made per request does not leave a table behind each time).
   * The same namespace with different limits gets a table of its own: state written under one
   * algorithm is never read by another.
   */
  bind(limits: readonly ResolvedLimit[], namespace: string): BoundStore {
    const id = `${namespace}\u0000${policyId(limits)}`;
    const known = this.byNamespace.get(id);
    if (known !== undefined) return known;
    const t = limits.length === 1 ? new SingleTable(this, limits) : new MultiTable(this, limits);
    this.tables.add(t);
    this.byNamespace.set(id, t);
    return t;
  }

  /** Drops every key whose state has expired at `nowMs`. Returns how many were dropped. */
  sweep(nowMs: number): number {
    let dropped = 0;
    for (const t of this.tables) dropped += t.sweep(nowMs);
    return dropped;
  }

  /** Stops the sweep timer (it never holds the process open anyway). */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Called before a table adds a key to its young generation: when the young generations are
   * full, every table turns. (Turning only when the whole store was full, as before, found the old
   * generation empty on the first fill, turned twice and dropped every key, hot ones included.)
   */
  makeRoom(): void {
    if (this.young < this.half) return;
    for (const t of this.tables) t.turn();
    this.young = 0;
  }
}

/**
 * The keys of one limiter in a {@link MemoryStore}: two generations (see MemoryStore) of entries
 * that know when they expire. Subclasses hold one slot per key (one limit) or an entry of slots.
 */
abstract class Table<E extends { exp: number }> implements BoundStore {
  protected young = new Map<string, E>();
  protected old = new Map<string, E>();
  protected readonly ev: Evaluator;
  /**
   * Expiry times are kept relative to this instant (the first time the table saw), so they stay
   * small integers: V8 stores those inline, while a field holding ms since the epoch points to a
   * separate number box, one more cache miss per decision over many keys (bench/memory.js).
   */
  protected base = 0;
  private based = false;

  constructor(
    private readonly store: MemoryStore,
    limits: readonly ResolvedLimit[],
  ) {
    this.ev = new Evaluator(limits);
  }

  abstract consume(key: string, cost: number, nowMs: number | undefined): Decision;
  abstract peek(key: string, cost: number, nowMs: number | undefined): Decision;
  abstract refund(key: string, cost: number, nowMs: number | undefined): void;
  /** A fresh entry. */
  protected abstract create(): E;
  /** Resets an expired entry in place to fresh states. */
  protected abstract clear(e: E): void;

  get held(): number {
    return this.young.size + this.old.size;
  }

  reset(key: string): void {
    if (this.young.delete(key)) {
      this.store.size--;
      this.store.young--;
    } else if (this.old.delete(key)) this.store.size--;
  }

  /** Finds the key in the old generation (moving it to the young one) or creates it. */
  protected adopt(key: string, now: number): E {
    let e = this.old.get(key);
    if (e !== undefined) {
      this.old.delete(key); // still counted in size; out of old before a turn can drop it
      if (e.exp <= now - this.base) this.clear(e);
      this.store.makeRoom();
    } else {
      if (!this.based) {
        this.base = now;
        this.based = true;
      }
      this.store.makeRoom();
      e = this.create();
      this.store.size++;
    }
    this.young.set(key, e);
    this.store.young++;
    return e;
  }

  /** The key's live entry in either generation, or undefined if absent or expired at `now`. */
  protected live(key: string, now: number): E | undefined {
    const e = this.young.get(key) ?? this.old.get(key);
    return e !== undefined && e.exp > now - this.base ? e : undefined;
  }

  /** Drops the old generation; the young one becomes old. */
  turn(): void {
    this.store.size -= this.old.size;
    this.old = this.young;
    this.young = new Map();
  }

  sweep(nowMs: number): number {
    let dropped = 0;
    const rel = nowMs - this.base;
    for (const m of [this.old, this.young]) {
      for (const [k, e] of m) {
        if (e.exp <= rel) {
          m.delete(k);
          dropped++;
          if (m === this.young) this.store.young--;
        }
      }
    }
    this.store.size -= dropped;
    return dropped;
  }
}

/** A limiter with one limit: each key is one {@link Slot}. The hot path of the library. */
class SingleTable extends Table<Slot> {
  private readonly fresh: Slot;

  constructor(store: MemoryStore, limits: readonly ResolvedLimit[]) {
    super(store, limits);
    this.fresh = this.create();
  }

  consume(key: string, cost: number, nowMs: number | undefined): Decision {
    const now = nowMs ?? loopNowMs();
    let e = this.young.get(key);
    if (e === undefined) e = this.adopt(key, now);
    else if (e.exp <= now - this.base) clearState(e);
    const d = this.ev.consume1(e, now, cost);
    if (d.allowed) e.exp = now - this.base + this.ev.ttlMs;
    return d;
  }

  peek(key: string, cost: number, nowMs: number | undefined): Decision {
    const now = nowMs ?? loopNowMs();
    return this.ev.peek1(this.live(key, now) ?? this.fresh, now, cost);
  }

  refund(key: string, cost: number, nowMs: number | undefined): void {
    const now = nowMs ?? loopNowMs();
    const e = this.live(key, now);
    if (e !== undefined) this.ev.refund([e], now, cost);
  }

  protected create(): Slot {
    return new Slot(this.ev.init1());
  }

  protected clear(e: Slot): void {
    clearState(e);
  }
}

/** A limiter with several limits: each key is an {@link Entry} of slots, decided all-or-nothing. */
class MultiTable extends Table<Entry> {
  private readonly fresh: Slot[];

  constructor(store: MemoryStore, limits: readonly ResolvedLimit[]) {
    super(store, limits);
    this.fresh = this.create().s;
  }

  consume(key: string, cost: number, nowMs: number | undefined): Decision {
    const now = nowMs ?? loopNowMs();
    let e = this.young.get(key);
    if (e === undefined) e = this.adopt(key, now);
    else if (e.exp <= now - this.base) this.ev.clear(e.s);
    const d = this.ev.run(e.s, now, cost, true);
    if (d.allowed) e.exp = now - this.base + this.ev.ttlMs;
    return d;
  }

  peek(key: string, cost: number, nowMs: number | undefined): Decision {
    const now = nowMs ?? loopNowMs();
    return this.ev.run(this.live(key, now)?.s ?? this.fresh, now, cost, false);
  }

  refund(key: string, cost: number, nowMs: number | undefined): void {
    const now = nowMs ?? loopNowMs();
    const e = this.live(key, now);
    if (e !== undefined) this.ev.refund(e.s, now, cost);
  }

  protected create(): Entry {
    return new Entry(this.ev.init().map((st) => new Slot(st)));
  }

  protected clear(e: Entry): void {
    this.ev.clear(e.s);
  }
}
