import { LeaseSet, newLeaseOutcome, type LeaseOutcome } from "../core/leases.js";
import type { BoundLeases, LeaseAnswer } from "../store.js";

/** What a refusal for want of room in the store says to retry after (ms). */
const FULL_RETRY_MS = 1000;

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

/**
 * The leases of one namespace in a {@link MemoryStore}: a {@link LeaseSet} per key that holds
 * leases, shared by every concurrency limit bound to the namespace whatever its limit, as in
 * Redis (where a key's sorted set is named by namespace and key only): a limiter made anew with
 * another limit, as a service does when a reload changes a pool's limit, sees the leases already
 * held. A key whose leases are all gone (released, or expired and swept) is dropped, so memory
 * follows the leases held, not the keys ever seen.
 */
export class LeaseKeys {
  readonly keys = new Map<string, LeaseSet>();
  /** A limiter binds it with an injected clock: the store's sweep timer (process clock) passes it by. */
  injectedClock = false;

  /** @param maxKeys the most keys holding leases (see {@link MemoryLeases.acquire}) */
  constructor(readonly maxKeys: number) {}

  /** Keys holding leases (some possibly expired, until the next sweep or use). */
  get size(): number {
    return this.keys.size;
  }

  /** Drops expired leases, and the keys left without any. Returns how many keys were dropped. */
  sweep(nowMs: number): number {
    let dropped = 0;
    for (const [key, set] of this.keys) {
      if (set.held(nowMs) === 0) {
        this.keys.delete(key);
        dropped++;
      }
    }
    return dropped;
  }
}

/**
 * One concurrency limit's view of a namespace's leases ({@link LeaseKeys}): at most `limit` held
 * per key. Bounded: when `maxKeys` keys hold leases, an acquire on a new key first drops expired
 * leases everywhere and, if every key still holds one, is refused (`reason: "overloaded"`): a key
 * with a live lease is never forgotten, since that would admit more than the limit.
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
    let set = this.keys.get(key);
    if (set === undefined) {
      const max = this.pool.maxKeys;
      if (this.keys.size >= max && (this.pool.sweep(now), this.keys.size >= max)) {
        return { ok: false, remaining: 0, retryAfterMs: FULL_RETRY_MS, reason: "overloaded" };
      }
      set = new LeaseSet();
      this.keys.set(key, set);
    }
    set.acquire(now, id, this.limit, leaseMs, this.out);
    return this.answer(this.out.ok ? undefined : "limit");
  }

  renew(key: string, id: string, leaseMs: number, nowMs: number | undefined): LeaseAnswer {
    const now = nowMs ?? leaseClock();
    const set = this.keys.get(key);
    const ok = set !== undefined && set.renew(now, id, leaseMs);
    return this.counted(key, set, now, ok);
  }

  release(key: string, id: string, nowMs: number | undefined): LeaseAnswer {
    const now = nowMs ?? leaseClock();
    const set = this.keys.get(key);
    const ok = set !== undefined && set.release(now, id);
    return this.counted(key, set, now, ok);
  }

  count(key: string, nowMs: number | undefined): LeaseAnswer {
    return this.counted(key, this.keys.get(key), nowMs ?? leaseClock(), false);
  }

  /** The key's count after a renew, release or count (dropping the key when it holds nothing). */
  private counted(key: string, set: LeaseSet | undefined, nowMs: number, ok: boolean): LeaseAnswer {
    if (set === undefined) return { ok, remaining: this.limit, retryAfterMs: 0, reason: undefined };
    set.count(nowMs, this.limit, this.out);
    if (this.out.held === 0) this.keys.delete(key);
    return { ok, remaining: this.out.remaining, retryAfterMs: this.out.retryAfterMs, reason: undefined };
  }

  private answer(reason: LeaseAnswer["reason"]): LeaseAnswer {
    const o = this.out;
    return { ok: o.ok, remaining: o.remaining, retryAfterMs: o.retryAfterMs, reason };
  }
}
