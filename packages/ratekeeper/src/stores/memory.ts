import type { LimitState } from "../core/algorithms/index.js";
import type { Decision } from "../core/decision.js";
import { describe } from "../core/duration.js";
import { RateLimitConfigError } from "../core/errors.js";
import { Evaluator } from "../core/evaluate.js";
import type { ResolvedLimit } from "../core/options.js";
import type { BoundStore, Store } from "../store.js";

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

/** One key's states, one per limit, and when they stop mattering. */
interface Entry {
  exp: number;
  readonly s: LimitState[];
}

/**
 * The embedded, bounded in-memory store: the default when a limiter is given no store.
 * Runs the core algorithms over plain maps, synchronously; exact within one process.
 *
 * Bounded by `maxKeys` with two generations: keys live in `young`; when the young generations
 * (over every limiter sharing the store) hold `maxKeys / 2` keys, every `old` (keys not used since
 * the previous turn) is dropped and `young` becomes `old`. A key used again moves back to `young`.
 * So a key used at least once per `maxKeys / 2` new keys stays, and `old + young <= maxKeys`.
 * @example
 * const store = new MemoryStore({ maxKeys: 100_000 });
 * const limiter = new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", store });
 */
export class MemoryStore implements Store {
  readonly maxKeys: number;
  private readonly tables = new Set<MemoryTable>();
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
      throw new RateLimitConfigError([{ path: "sweepIntervalMs", message: `must be a whole number >= 0 (got ${describe(options.sweepIntervalMs)})` }]);
    }
    this.maxKeys = maxKeys;
    this.half = Math.floor(maxKeys / 2);
    if (sweep > 0) {
      this.timer = setInterval(() => this.sweep(Date.now()), sweep);
      this.timer.unref?.();
    }
  }

  bind(limits: readonly ResolvedLimit[]): BoundStore {
    const t = new MemoryTable(this, limits);
    this.tables.add(t);
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

/** The keys of one limiter in a {@link MemoryStore}. */
class MemoryTable implements BoundStore {
  private young = new Map<string, Entry>();
  private old = new Map<string, Entry>();
  private readonly ev: Evaluator;
  private readonly fresh: LimitState[];

  constructor(
    private readonly store: MemoryStore,
    limits: readonly ResolvedLimit[],
  ) {
    this.ev = new Evaluator(limits);
    this.fresh = this.ev.init();
  }

  get held(): number {
    return this.young.size + this.old.size;
  }

  consume(key: string, cost: number, nowMs: number | undefined): Decision {
    const now = nowMs ?? Date.now();
    let e = this.young.get(key);
    if (e === undefined) e = this.adopt(key, now);
    else if (e.exp <= now) this.ev.clear(e.s);
    const d = this.ev.run(e.s, now, cost, true);
    if (d.allowed) e.exp = now + this.ev.ttlMs;
    return d;
  }

  peek(key: string, cost: number, nowMs: number | undefined): Decision {
    const now = nowMs ?? Date.now();
    const e = this.young.get(key) ?? this.old.get(key);
    const states = e === undefined || e.exp <= now ? this.fresh : e.s;
    return this.ev.run(states, now, cost, false);
  }

  refund(key: string, cost: number, nowMs: number | undefined): void {
    const now = nowMs ?? Date.now();
    const e = this.young.get(key) ?? this.old.get(key);
    if (e !== undefined && e.exp > now) this.ev.refund(e.s, now, cost);
  }

  reset(key: string): void {
    if (this.young.delete(key)) {
      this.store.size--;
      this.store.young--;
    } else if (this.old.delete(key)) this.store.size--;
  }

  /** Finds the key in the old generation (moving it to the young one) or creates it. */
  private adopt(key: string, now: number): Entry {
    let e = this.old.get(key);
    if (e !== undefined) {
      this.old.delete(key); // still counted in size; out of old before a turn can drop it
      if (e.exp <= now) this.ev.clear(e.s);
      this.store.makeRoom();
    } else {
      this.store.makeRoom();
      e = { exp: 0, s: this.ev.init() };
      this.store.size++;
    }
    this.young.set(key, e);
    this.store.young++;
    return e;
  }

  /** Drops the old generation; the young one becomes old. */
  turn(): void {
    this.store.size -= this.old.size;
    this.old = this.young;
    this.young = new Map();
  }

  sweep(nowMs: number): number {
    let dropped = 0;
    for (const m of [this.old, this.young]) {
      for (const [k, e] of m) {
        if (e.exp <= nowMs) {
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
