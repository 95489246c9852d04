import type { BoundLeases } from "../../store.js";

/**
 * What the failure policy of a namespace's concurrency limits did while Redis did not answer,
 * that Redis must learn when it answers again (lease-ledger.ts hands it over): the leases it
 * granted locally, and the releases of Redis leases that did not reach Redis.
 */

/** Leases granted locally (the failure policy), and releases owed, remembered per namespace: past it the oldest are forgotten. */
const MAX_LOCAL_IDS = 100_000;

/**
 * The estimated bytes each of those tables holds at most, per namespace: past it the oldest are
 * forgotten, as past the count. The count alone let a client sending distinct keys of 512
 * characters during an outage (a policy of `"open"` grants each) hold ~174 MB per namespace
 * (~870 bytes an entry, measured); with this, 50 MB for both tables
 * (measured: 39,000 entries each of such keys; the estimate, 64 MB, errs high). Keys and ids of a
 * few dozen characters meet the count first.
 */
export const LOCAL_LEASE_BYTES = 32 * 1024 * 1024;

/** An entry's estimated bytes: its key and id (one byte a character) and the maps' and record's share (measured ~300). */
function entryBytes(key: string, id: string): number {
  return key.length + id.length + 300;
}

/** A lease the failure policy of a RedisStore granted while Redis did not answer. */
export interface LocalLease {
  readonly key: string;
  /**
   * The local table holding it; `"none"` (policy `"open"`: granted without any lease); or
   * `"redis"`: a lease held in Redis that the policy said was renewed (Redis did not hear of it).
   */
  readonly where: BoundLeases | "none" | "redis";
  /** When it expires (ms, on the clock it was granted on: the injected one, else the memory store's `leaseClock()`). */
  expiresAt: number;
  /** Whether `expiresAt` is on the limiter's injected clock. */
  readonly injected: boolean;
  /** The limit of the limiter that answered (a Redis lease taken again needs a free slot under it). */
  readonly limit: number;
  /**
   * Granted because Redis refused the key (it holds a value the store did not write): not handed
   * to Redis on a timer, which would refuse it the same way; its renew and release stay local
   * until a call on its key hands it over (lease-ledger.ts handKey: the value was deleted).
   */
  refused?: boolean;
  /** Its hand-over to Redis, while one is under way (renews and releases wait for it). */
  handing: Promise<void> | undefined;
}

/**
 * The leases one concurrency limit's failure policy granted locally (or renewed, for a Redis
 * lease), by id. Their renew and
 * release on the same key stay where they were granted (an id named with another key is not
 * that lease), until the lease is handed to Redis once it answers again (leases.ts).
 */
export class LocalLeases {
  private readonly ids = new Map<string, LocalLease>();
  /** The ids of each key's entries. */
  private readonly byKey = new Map<string, Set<string>>();
  /** Leases still to hand to Redis. */
  held = 0;
  /** Estimated bytes of the entries, bounded by {@link LOCAL_LEASE_BYTES}. */
  bytes = 0;

  /** The local lease `id` on `key`, if there is one. */
  of(key: string, id: string): LocalLease | undefined {
    const l = this.ids.get(id);
    return l !== undefined && l.key === key ? l : undefined;
  }

  add(key: string, id: string, l: Omit<LocalLease, "key" | "handing">): void {
    const size = entryBytes(key, id);
    while (this.ids.size > 0 && (this.ids.size >= MAX_LOCAL_IDS || this.bytes + size > LOCAL_LEASE_BYTES)) {
      const first = this.ids.entries().next();
      if (first.done) break;
      this.drop(first.value[0], first.value[1]);
    }
    const had = this.ids.get(id);
    if (had !== undefined) this.drop(id, had);
    this.ids.set(id, { ...l, key, handing: undefined });
    this.bytes += size;
    let ids = this.byKey.get(key);
    if (ids === undefined) this.byKey.set(key, (ids = new Set()));
    ids.add(id);
    this.held++;
  }

  /** Forgets `l` (released, expired, or handed to Redis), unless `id` is another lease by now. */
  drop(id: string, l: LocalLease): void {
    if (this.ids.get(id) !== l) return;
    this.ids.delete(id);
    this.bytes -= entryBytes(l.key, id);
    const ids = this.byKey.get(l.key);
    ids?.delete(id);
    if (ids?.size === 0) this.byKey.delete(l.key);
    this.held--;
  }

  /** The leases not being handed to Redis now (of `key` only, when given). */
  *toHand(key?: string): Generator<[string, LocalLease]> {
    if (key === undefined) {
      for (const [id, l] of this.ids) if (l.handing === undefined) yield [id, l];
      return;
    }
    for (const id of [...(this.byKey.get(key) ?? [])]) {
      const l = this.ids.get(id);
      if (l !== undefined && l.handing === undefined) yield [id, l];
    }
  }

  /** Whether `key` has entries. */
  has(key: string): boolean {
    return this.byKey.has(key);
  }
}

/** A release of a Redis lease that Redis did not get: its key, and the injected time it was made at (else undefined). */
export interface OwedRelease {
  readonly key: string;
  readonly nowMs: number | undefined;
  /** The releasing limiter's leaseMs: how long the release stands in Redis if it does not hold the id. */
  readonly leaseMs: number;
}

/**
 * Releases of Redis leases that Redis did not get (the failure policy answered them), by lease
 * id: sent again once Redis answers, so the slot comes back then rather than when the lease
 * expires.
 */
export class OwedReleases {
  private readonly ids = new Map<string, OwedRelease>();
  /** Estimated bytes of the entries, bounded by {@link LOCAL_LEASE_BYTES}. */
  bytes = 0;

  get size(): number {
    return this.ids.size;
  }

  add(id: string, o: OwedRelease): void {
    this.forget(id);
    const size = entryBytes(o.key, id);
    while (this.ids.size > 0 && (this.ids.size >= MAX_LOCAL_IDS || this.bytes + size > LOCAL_LEASE_BYTES)) {
      const first = this.ids.keys().next();
      if (first.done) break;
      this.forget(first.value);
    }
    this.ids.set(id, o);
    this.bytes += size;
  }

  private forget(id: string): void {
    const o = this.ids.get(id);
    if (o === undefined) return;
    this.ids.delete(id);
    this.bytes -= entryBytes(o.key, id);
  }

  /** Takes out the releases owed on the keys that `mine` accepts. */
  take(mine: (key: string) => boolean): [string, OwedRelease][] {
    const out: [string, OwedRelease][] = [];
    for (const [id, o] of this.ids) {
      if (!mine(o.key)) continue;
      this.forget(id);
      out.push([id, o]);
    }
    return out;
  }
}
