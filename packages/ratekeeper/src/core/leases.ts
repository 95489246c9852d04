/**
 * The leases of one key of a concurrency limit, as a pure state machine over integer
 * milliseconds: at most `limit` leases held at once; a lease expires `leaseMs` after it was
 * acquired or last renewed (it is held while `nowMs < expiresAt`), so a holder that crashed gives
 * its slot back without anyone releasing it. `stores/redis/scripts/concurrency.lua` keeps the
 * same table as a sorted set (member = lease id, score = expiry) and answers bit-identically; the
 * differential test holds the two together, and a property test holds this one to a plain list.
 *
 * Kept as a map from lease id to expiry plus a lower bound on the earliest expiry: while the
 * clock is before that bound no lease can have expired, so acquire, renew and release are O(1);
 * the table is scanned (expired leases dropped, the bound made exact) only when a lease may have
 * expired, or when the table is full and a denial must say exactly when the first slot frees.
 */
export class LeaseSet {
  private readonly expiries = new Map<string, number>();
  /** No lease expires before this (ms); exact when `!stale`. */
  private minMs = Number.POSITIVE_INFINITY;
  /** A lease at `minMs` left (released or renewed): `minMs` is only a lower bound. */
  private stale = false;

  /** Leases in the table, including any expired ones not yet dropped (see {@link LeaseSet.held}). */
  get size(): number {
    return this.expiries.size;
  }

  /** Whether `id` is in the table (held, or expired and not yet dropped). */
  has(id: string): boolean {
    return this.expiries.has(id);
  }

  /** Leases held at `nowMs` (drops the expired ones). */
  held(nowMs: number): number {
    this.prune(nowMs);
    return this.expiries.size;
  }

  /**
   * What an acquire would say at `nowMs`, with `ok: false` and nothing taken: the slots free, and
   * when none is, the ms until the earliest lease expires.
   */
  count(nowMs: number, limit: number, out: LeaseOutcome): void {
    this.prune(nowMs);
    const held = this.expiries.size;
    out.ok = false;
    out.remaining = Math.max(0, limit - held);
    out.retryAfterMs = held >= limit && held > 0 ? this.earliest() - nowMs : 0;
    out.held = held;
  }

  /**
   * Takes a slot for `id` when fewer than `limit` leases are held at `nowMs`; it expires at
   * `nowMs + leaseMs`. An `id` already held is renewed instead (a retried acquire is not counted
   * twice). Fills `out`: `remaining` slots after this one, or, when full, `retryAfterMs` until the
   * earliest lease expires (when a slot frees if nobody releases or renews).
   */
  acquire(nowMs: number, id: string, limit: number, leaseMs: number, out: LeaseOutcome): void {
    this.prune(nowMs);
    const has = this.expiries.has(id);
    if (has || this.expiries.size < limit) {
      this.put(id, nowMs + leaseMs, has);
      out.ok = true;
      out.remaining = Math.max(0, limit - this.expiries.size);
      out.retryAfterMs = 0;
    } else {
      out.ok = false;
      out.remaining = 0;
      out.retryAfterMs = this.earliest() - nowMs;
    }
    out.held = this.expiries.size;
  }

  /** Extends a held lease to `nowMs + leaseMs`. False (and nothing changes) when it is not held: expired or released. */
  renew(nowMs: number, id: string, leaseMs: number): boolean {
    this.prune(nowMs);
    if (!this.expiries.has(id)) return false;
    this.put(id, nowMs + leaseMs, true);
    return true;
  }

  /** Gives the slot of `id` back. False when it was not held (released before, or expired). Idempotent. */
  release(nowMs: number, id: string): boolean {
    this.prune(nowMs);
    const at = this.expiries.get(id);
    if (at === undefined) return false;
    this.expiries.delete(id);
    if (at === this.minMs) this.stale = true;
    if (this.expiries.size === 0) this.clear();
    return true;
  }

  /** When the last lease held expires (ms), or -Infinity when none is held: the key's state matters until then. */
  latest(): number {
    let max = Number.NEGATIVE_INFINITY;
    for (const at of this.expiries.values()) if (at > max) max = at;
    return max;
  }

  /** Drops the leases expired at `nowMs` (those with `expiresAt <= nowMs`). */
  prune(nowMs: number): void {
    if (nowMs < this.minMs) return;
    this.scan(nowMs);
  }

  private put(id: string, at: number, had: boolean): void {
    if (had && this.expiries.get(id) === this.minMs) this.stale = true;
    this.expiries.set(id, at);
    if (at < this.minMs) {
      this.minMs = at;
      this.stale = false;
    }
  }

  /** The earliest expiry held (exact). */
  private earliest(): number {
    if (this.stale) this.scan(Number.NEGATIVE_INFINITY);
    return this.minMs;
  }

  /** Drops leases expired at `nowMs` and makes `minMs` exact. */
  private scan(nowMs: number): void {
    let min = Number.POSITIVE_INFINITY;
    for (const [id, at] of this.expiries) {
      if (at <= nowMs) this.expiries.delete(id);
      else if (at < min) min = at;
    }
    this.minMs = min;
    this.stale = false;
  }

  private clear(): void {
    this.minMs = Number.POSITIVE_INFINITY;
    this.stale = false;
  }
}

/** What an acquire (or a renew, a release, a count) said. Reused per call, like {@link Outcome}. */
export interface LeaseOutcome {
  /** Acquired (or renewed, released). */
  ok: boolean;
  /** Slots free after this call. */
  remaining: number;
  /** 0 unless an acquire was refused: ms until the earliest lease expires. */
  retryAfterMs: number;
  /** Leases held after this call. */
  held: number;
}

/** A fresh scratch {@link LeaseOutcome}. */
export function newLeaseOutcome(): LeaseOutcome {
  return { ok: false, remaining: 0, retryAfterMs: 0, held: 0 };
}
