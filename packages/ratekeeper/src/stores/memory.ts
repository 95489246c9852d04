import { describeValue, RateLimitConfigError, unknownOptions, type ConfigIssue } from "../core/errors.js";
import { MAX_TIMER_MS } from "../core/max-timer.js";
import type { ResolvedLimit } from "../core/options.js";
import { policyId } from "../core/policy-id.js";
import type { BindOptions, BoundLeases, BoundStore, ClockOptions, Store } from "../store.js";
import { LeaseBudget, LeaseKeys, leaseClock, MemoryLeases } from "./memory-leases.js";
import { singleTable } from "./memory-kinds.js";
import { MultiTable } from "./memory-multi.js";
import type { Table, TableOwner } from "./memory-table.js";
import { isPlainObject } from "../core/plain-object.js";
import { describeAs } from "../core/describe.js";

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
   * The most memory the keys may take, in bytes, over every limiter sharing the store, as
   * estimated per key ({@link MemoryStore.bytes}: the key string, the map entry, the state and
   * its ring; about 130-400 bytes for a short key, plus 8 bytes per logged unit for a
   * sliding log). Dropped first are the same keys as for `maxKeys`; whichever bound is reached
   * first applies. A sliding log's ring grows with the units a key has inside one window at
   * once (about twice its busiest window, up to `limit` units), so this is the bound that holds
   * when many keys each log many units at a time.
   * @default 268_435_456 (256 MiB)
   */
  maxBytes?: number;
  /**
   * How often expired keys are swept (ms), by a timer that never keeps the process alive. The
   * timer starts with the store's first key, never at construction, so a store made in a
   * module's global scope is allowed on Cloudflare Workers (which forbid timers there).
   * Expired keys are also treated as new on their next use, so this only returns memory sooner.
   * The timer reads the process clock, so it passes by the keys of limiters with an injected
   * `clock` (their bounds `maxKeys` and `maxBytes` still hold). `0` turns the sweep off.
   * @default 60_000
   */
  sweepIntervalMs?: number;
}

const MEMORY_STORE_OPTIONS = ["maxKeys", "maxBytes", "sweepIntervalMs"];

/**
 * The embedded, bounded in-memory store: the default when a limiter is given no store.
 * Runs the core algorithms over plain maps, synchronously; exact within one process.
 *
 * Bounded by `maxKeys` and `maxBytes` with two generations: keys live in `young`; when the young
 * generations (over every limiter sharing the store) hold `maxKeys / 2` keys or `maxBytes / 2`
 * bytes, every `old` (keys not used since the previous turn) is dropped and `young` becomes `old`.
 * A key used again moves back to `young`. So a key used at least once per `maxKeys / 2` new keys
 * (and `maxBytes / 2` new bytes) stays, `old + young <= maxKeys`, and the estimated bytes stay
 * within `maxBytes` (plus one ring's growth).
 *
 * Time: the limiter's injected clock, else `Date.now()` read once per turn of the event loop and
 * shared by the decisions of that turn (at most 16 per reading), like the loop's own clock that
 * timers run on; a replaced `Date.now` (fake timers) is read on every call (see loop-clock.ts).
 * @example
 * const store = new MemoryStore({ maxKeys: 100_000, maxBytes: 64 * 1024 * 1024 });
 * const limiter = new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", store });
 */
export class MemoryStore implements Store, TableOwner {
  readonly maxKeys: number;
  /** The bound on {@link MemoryStore.bytes}. */
  readonly maxBytes: number;
  /** The tables holding keys: swept and turned. A table without keys is held only by its limiters. */
  private readonly tables = new Set<Table<{ exp: number }>>();
  /**
   * Every table by namespace and limits, held weakly: a limiter made per request with limits of
   * its own (per-user plans) binds a table each time, which goes once its keys are gone and no
   * limiter holds it (~2.5-3.3 KB each, kept for good before).
   */
  private readonly byPolicy = new Map<string, TableRef>();
  /** Forgets the entry of a table collected (unless another took its place). */
  private readonly collected = finalizer((id: string) => {
    if (this.byPolicy.get(id)?.deref() === undefined) this.byPolicy.delete(id);
  });
  /** Concurrency limits' leases, by namespace (every limit bound to a namespace shares them). */
  private readonly leasePools = new Map<string, LeaseKeys>();
  /** The estimated bytes of every lease held, bounded by `maxBytes` (a budget of their own: leases are never dropped). */
  private leaseBudget: LeaseBudget | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  /** The sweep's period; 0 once closed or when turned off. */
  private sweepMs: number;
  /** Keys held now, over all tables (pinned ones included). */
  size = 0;
  /**
   * @internal Keys pinned (stores/memory-pins.ts): held whatever the turns until released, on top
   * of `maxKeys` and `maxBytes`; the Redis store's degraded policy pins the keys of its ledger.
   */
  pinned = 0;
  /** Keys in the young generations, over all tables. */
  young = 0;
  /** Estimated bytes of the keys held now, over all tables (see stores/memory-size.ts). */
  bytes = 0;
  /** Estimated bytes of the young generations. */
  youngBytes = 0;
  /** Young keys that trigger a turn: the old generations never hold more, so size <= maxKeys. */
  private readonly half: number;
  /** Young bytes that trigger a turn. */
  private readonly halfBytes: number;

  constructor(options: MemoryStoreOptions = {}) {
    if (!isPlainObject(options)) {
      throw new RateLimitConfigError([{ path: "options", message: `must be an object (got ${describeValue(options)})` }]);
    }
    const issues: ConfigIssue[] = [];
    unknownOptions(options, MEMORY_STORE_OPTIONS, issues);
    const maxKeys = options.maxKeys ?? 1_000_000;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 2) {
      issues.push({ path: "maxKeys", message: `must be a whole number >= 2 (got ${describeValue(options.maxKeys)})` });
    }
    const maxBytes = options.maxBytes ?? 268_435_456;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 4096) {
      issues.push({ path: "maxBytes", message: `must be a whole number of bytes >= 4096 (got ${describeValue(options.maxBytes)})` });
    }
    const sweep = options.sweepIntervalMs ?? 60_000;
    if (!Number.isSafeInteger(sweep) || sweep < 0) {
      issues.push({ path: "sweepIntervalMs", message: `must be a whole number >= 0 (got ${describeValue(options.sweepIntervalMs)})` });
    }
    if (issues.length > 0) throw new RateLimitConfigError(issues, "MemoryStore");
    this.maxKeys = maxKeys;
    this.maxBytes = maxBytes;
    this.half = Math.floor(maxKeys / 2);
    this.halfBytes = Math.floor(maxBytes / 2);
    this.sweepMs = sweep;
  }

  /**
   * Limiters bound with the same namespace and the same limits share one table, as they share
   * keys in Redis (and a limiter made per request does not leave a table behind each time).
   * The same namespace with different limits gets a table of its own: state written under one
   * algorithm is never read by another. A table is held by the store while it has keys and by
   * its limiters, so limiters made per request with limits of their own leave nothing behind once
   * their keys are gone.
   */
  bind(limits: readonly ResolvedLimit[], namespace: string, options?: BindOptions): BoundStore {
    return this.bindTable(limits, namespace, options);
  }

  /** @internal {@link MemoryStore.bind}, as the table itself: synchronous, with pins (the Redis store's degraded policy). */
  bindTable(limits: readonly ResolvedLimit[], namespace: string, options?: BindOptions): Table<{ exp: number }> {
    const id = `${namespace}\u0000${policyId(limits)}`;
    let t = this.byPolicy.get(id)?.deref();
    if (t === undefined) {
      t = limits.length === 1 ? singleTable(this, limits) : new MultiTable(this, limits);
      this.byPolicy.set(id, tableRef(t));
      this.collected?.register(t, id);
    }
    if (options?.injectedClock === true) t.injectedClock = true;
    return t;
  }

  /**
   * Concurrency limits bound with the same namespace share their leases, whatever their limits,
   * as they do in Redis: each acquire is held to its own limiter's limit against every lease of
   * the key. Keys holding leases are bounded by `maxKeys` per namespace, and the leases' estimated
   * bytes by `maxBytes` over all of them, beside the limiters' state (see memory-leases.ts).
   */
  bindLeases(limit: number, namespace: string, options?: ClockOptions): BoundLeases {
    let pool = this.leasePools.get(namespace);
    if (pool === undefined) {
      this.leaseBudget ??= new LeaseBudget(this.maxBytes);
      pool = new LeaseKeys(this.maxKeys, this.leaseBudget);
      this.leasePools.set(namespace, pool);
    }
    if (options?.injectedClock === true) pool.injectedClock = true;
    return new MemoryLeases(pool, limit);
  }

  /** Drops every key whose state has expired at `nowMs` (and every expired lease). Returns how many keys were dropped. */
  sweep(nowMs: number): number {
    let dropped = 0;
    for (const t of this.tables) {
      dropped += t.sweep(nowMs);
      this.letGoIfEmpty(t);
    }
    for (const p of this.leasePools.values()) dropped += p.sweep(nowMs);
    return dropped;
  }

  /** Stops the sweep timer for good (it never holds the process open anyway). */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.sweepMs = 0;
  }

  /** Starts the sweep timer; called with the first key, inside a request on every runtime. */
  private startSweep(): void {
    // At most what a timer holds (2^31 - 1 ms): node runs a longer interval every millisecond.
    this.timer = setInterval(() => this.sweepOnOwnClock(Date.now()), Math.min(this.sweepMs, MAX_TIMER_MS));
    this.timer.unref?.();
  }

  /**
   * The timer's sweep, on the process clock: only the tables and lease pools whose limiters use
   * the store's own time. Keys of a limiter with an injected clock may be live on that clock
   * while expired on this one; they stay until their next use or until a turn drops them.
   */
  private sweepOnOwnClock(nowMs: number): void {
    for (const t of this.tables) {
      if (t.injectedClock) continue;
      t.sweep(nowMs);
      this.letGoIfEmpty(t);
    }
    const leaseNow = leaseClock(); // the leases' own clock (memory-leases.ts)
    for (const p of this.leasePools.values()) if (!p.injectedClock) p.sweep(leaseNow);
  }

  /**
   * Called before a table adds a key to its young generation: when the young generations are
   * full, every table turns. (Turning only when the whole store was full, as before, found the old
   * generation empty on the first fill, turned twice and dropped every key, hot ones included.)
   */
  makeRoom(): void {
    if (this.timer === undefined && this.sweepMs > 0) this.startSweep();
    if (this.young < this.half && this.youngBytes < this.halfBytes) return;
    for (const t of this.tables) {
      t.turn();
      this.letGoIfEmpty(t);
    }
    this.young = 0;
    this.youngBytes = 0;
  }

  /** @internal A table without keys takes one (memory-table.ts): held, swept and turned from now on. */
  attach(t: Table<{ exp: number }>): void {
    t.attached = true;
    this.tables.add(t);
  }

  /** Lets a table without keys go: its limiters hold it, if any still do (deleting while iterating a Set is safe). */
  private letGoIfEmpty(t: Table<{ exp: number }>): void {
    if (t.held !== 0) return;
    t.attached = false;
    this.tables.delete(t);
  }
}

/** A table held weakly where the runtime has WeakRef (node, browsers, Deno, Bun, Workers), else strongly. */
interface TableRef {
  deref(): Table<{ exp: number }> | undefined;
}

function tableRef(t: Table<{ exp: number }>): TableRef {
  return typeof WeakRef === "function" ? new WeakRef(t) : { deref: () => t };
}

function finalizer(cleanup: (id: string) => void): FinalizationRegistry<string> | undefined {
  return typeof FinalizationRegistry === "function" ? new FinalizationRegistry(cleanup) : undefined;
}

describeAs(MemoryStore, "MemoryStore", (s) => ({ keys: s.size, bytes: s.bytes, maxKeys: s.maxKeys, maxBytes: s.maxBytes }));
