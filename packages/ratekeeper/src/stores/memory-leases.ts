import { LeaseSet, newLeaseOutcome, type LeaseOutcome } from "../core/leases.js";
import type { BoundLeases, LeaseAnswer } from "../store.js";
import { keyBytes } from "./memory-size.js";

/** What a refusal for want of room in the store says to retry after (ms). */
const FULL_RETRY_MS = 1000;

/**
 * Estimated bytes of a key's lease table beyond its key string: the map entry, the `LeaseSet`
 * and its map. With {@link LEASE_BYTES}, calibrated on Node 20 (64-bit) as stores/memory-size.ts
 * is: a fresh key holding one lease measured about 470 bytes besides a short key string, each
 * further lease on a key 195-225.
 */
const SET_BYTES = 256;
/** Estimated bytes of one lease held: its id string and its map entry (see {@link SET_BYTES}). */
const LEASE_BYTES = 224;

/**
 * The memory store's own time for leases (when no clock is injected): whole ms on the process's
 * monotonic clock, from about the epoch. Not `Date.now()`: a lease must live `leaseMs` of real
 * time, and a step of the wall clock (an NTP correction, a resumed VM) would end every lease at
 * once (an hour ahead: slots still in use granted again) or hold them on (a day behind: a crashed
 * holder's slot held a day).
 */
export function leaseClock(): number {
  return Math.floor(performance.timeOrigin + performance.now());
}

/** The estimated bytes of every lease table of a store (all namespaces), and their bound: the store's `maxBytes`. */
export class LeaseBudget {
  bytes = 0;
  constructor(readonly maxBytes: number) {}
}

/**
 * The leases of one namespace in a {@link MemoryStore}: a {@link LeaseSet} per key that holds
 * leases, shared by every concurrency limit bound to the namespace whatever its limit, as in
 * Redis (where a key's sorted set is named by namespace and key only): a limiter made anew with
 * another limit, as a service does when a reload changes a pool's limit, sees the leases already
 * held. A key whose leases are all gone (released, or expired and swept) is dropped, so memory
 * follows the leases held, not the keys ever seen. Bounded by `maxKeys` keys holding leases and
 * by the store's byte budget (see {@link LeaseKeys.room}).
 */
export class LeaseKeys {
  readonly keys = new Map<string, LeaseSet>();
  /** A limiter binds it with an injected clock: the store's sweep timer (process clock) passes it by. */
  injectedClock = false;

  constructor(
    readonly maxKeys: number,
    private readonly budget: LeaseBudget,
  ) {}

  /** Keys holding leases (some possibly expired, until the next sweep or use). */
  get size(): number {
    return this.keys.size;
  }

  /**
   * Whether there is room for a new key (`newKey`) and a new lease: within `maxKeys` keys and
   * the byte budget, after dropping this namespace's expired leases if there was none. A lease
   * held is never dropped to make room: that would admit more than the limit.
   */
  room(newKey: string | undefined, lease: boolean, nowMs: number): boolean {
    const need = (newKey === undefined ? 0 : keyBytes(newKey) + SET_BYTES) + (lease ? LEASE_BYTES : 0);
    const fits = () => (newKey === undefined || this.keys.size < this.maxKeys) && this.budget.bytes + need <= this.budget.maxBytes;
    if (fits()) return true;
    this.sweep(nowMs);
    return fits();
  }

  /** The table of `key`, made (and counted) if it has none. */
  open(key: string): LeaseSet {
    let set = this.keys.get(key);
    if (set === undefined) {
      set = new LeaseSet();
      this.keys.set(key, set);
      this.budget.bytes += keyBytes(key) + SET_BYTES;
    }
    return set;
  }

  /** Counts the leases a table gained or lost since it held `before` (in the table, expired or not). */
  resized(set: LeaseSet, before: number): void {
    this.budget.bytes += (set.size - before) * LEASE_BYTES;
  }

  /** Drops the table of `key` (it holds nothing). */
  drop(key: string, set: LeaseSet): void {
    if (this.keys.get(key) !== set) return;
    this.keys.delete(key);
    this.budget.bytes -= keyBytes(key) + SET_BYTES + set.size * LEASE_BYTES;
  }

  /** Drops expired leases, and the keys left without any. Returns how many keys were dropped. */
  sweep(nowMs: number): number {
    let dropped = 0;
    for (const [key, set] of this.keys) {
      const before = set.size;
      const held = set.held(nowMs);
      this.resized(set, before);
      if (held === 0) {
        this.drop(key, set);
        dropped++;
      }
    }
    return dropped;
  }
}

/**
 * One concurrency limit's view of a namespace's leases ({@link LeaseKeys}): at most `limit` held
 * per key. Bounded: when the namespace's keys or the store's lease bytes are at their bound, an
 * acquire that needs a new key or a new lease first drops expired leases everywhere and, if there
 * is still no room, is refused (`reason: "overloaded"`): a key with a live lease is never
 * forgotten, since that would admit more than the limit.
 */
export class MemoryLeases implements BoundLeases {
  private readonly keys: Map<string, LeaseSet>;
  private readonly out: LeaseOutcome = newLeaseOutcome();

  constructor(
    private readonly pool: LeaseKeys,
    private readonly limit: number,
  ) {
    this.keys = pool.keys;
  }

  acquire(key: string, id: string, leaseMs: number, nowMs: number | undefined): LeaseAnswer {
    const now = nowMs ?? leaseClock();
    const had = this.keys.get(key);
    // An id already held is renewed in place: it needs no room.
    if (!this.pool.room(had === undefined ? key : undefined, had === undefined || !had.has(id), now)) {
      return { ok: false, remaining: 0, retryAfterMs: FULL_RETRY_MS, reason: "overloaded" };
    }
    const set = this.pool.open(key); // a sweep for room may have dropped the key's table
    const before = set.size;
    set.acquire(now, id, this.limit, leaseMs, this.out);
    this.pool.resized(set, before);
    return this.answer(this.out.ok ? undefined : "limit");
  }

  renew(key: string, id: string, leaseMs: number, nowMs: number | undefined): LeaseAnswer {
    const now = nowMs ?? leaseClock();
    const set = this.keys.get(key);
    if (set === undefined) return this.counted(key, set, now, false);
    const before = set.size;
    const ok = set.renew(now, id, leaseMs);
    this.pool.resized(set, before);
    return this.counted(key, set, now, ok);
  }

  release(key: string, id: string, nowMs: number | undefined): LeaseAnswer {
    const now = nowMs ?? leaseClock();
    const set = this.keys.get(key);
    if (set === undefined) return this.counted(key, set, now, false);
    const before = set.size;
    const ok = set.release(now, id);
    this.pool.resized(set, before);
    return this.counted(key, set, now, ok);
  }

  count(key: string, nowMs: number | undefined): LeaseAnswer {
    return this.counted(key, this.keys.get(key), nowMs ?? leaseClock(), false);
  }

  /** The key's count after a renew, release or count (dropping the key when it holds nothing). */
  private counted(key: string, set: LeaseSet | undefined, nowMs: number, ok: boolean): LeaseAnswer {
    if (set === undefined) return { ok, remaining: this.limit, retryAfterMs: 0, reason: undefined };
    const before = set.size;
    set.count(nowMs, this.limit, this.out);
    this.pool.resized(set, before);
    if (this.out.held === 0) this.pool.drop(key, set);
    return { ok, remaining: this.out.remaining, retryAfterMs: this.out.retryAfterMs, reason: undefined };
  }

  private answer(reason: LeaseAnswer["reason"]): LeaseAnswer {
    const o = this.out;
    return { ok: o.ok, remaining: o.remaining, retryAfterMs: o.retryAfterMs, reason };
  }
}
