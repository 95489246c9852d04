/** How often kept keys are checked for expiry (ms): a kept pin outlives its state by at most this. */
const SWEEP_MS = 10_000;
/** Keys kept at most, per degraded limiter (on top of its ledger's pins); the oldest gives way. */
const MAX_KEPT_KEYS = 100_000;

/**
 * The keys whose local state the `"degraded"` policy keeps pinned after Redis only partly took
 * their units (degraded.ts `charged`), each until that state has expired.
 *
 * Why: when Redis had no room for all of a key's units (the key used up there too), Redis does
 * not count the rest; the local state does, and it is what denies the key at the next outage in
 * the same window. Left in the local store's generations like any key's, a flood of other keys
 * in that outage dropped it, and the key got a fresh share again on top of a full Redis. Pinned,
 * it lasts until it expires (checked every SWEEP_MS on the process clock, by a timer that runs
 * only while keys are kept), or until the key is reset, or until Redis takes all of its units.
 *
 * Bounded: at most MAX_KEPT_KEYS keys, a new one taking the place of the one kept longest. The
 * bound is not the ledger's: sharing it, either kept keys left new admissions unrecorded (never
 * charged to Redis), or new ledger keys pushed the kept ones out, and a flood of 100,000 keys
 * then dropped a kept state as before. To push a kept key out, a client needs 100,000 keys of
 * its own that Redis also had no room for.
 */
export class KeptKeys {
  /** Each kept key, oldest first, with when its local state has expired (Date.now() ms). */
  private readonly until = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;

  /** @param unpin lets go of the key's pin in the local store (one holder) */
  constructor(private readonly unpin: (key: string) => void) {}

  get size(): number {
    return this.until.size;
  }

  /**
   * Keeps `key` until `untilMs` (Date.now() ms) or later. True when it was not kept yet: the
   * caller's pin is now this one's; false when it was (the caller lets go of its own pin).
   */
  keep(key: string, untilMs: number): boolean {
    const had = this.until.get(key);
    if (had !== undefined) {
      if (untilMs > had) this.until.set(key, untilMs);
      return false;
    }
    if (this.until.size >= MAX_KEPT_KEYS) this.releaseOldest();
    this.until.set(key, untilMs);
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.sweep(Date.now()), SWEEP_MS);
      this.timer.unref?.();
    }
    return true;
  }

  /** Lets go of `key`, if kept (a reset, or Redis took all of its units). */
  release(key: string): void {
    if (!this.until.delete(key)) return;
    this.unpin(key);
    this.stopWhenEmpty();
  }

  /** Lets go of the key kept longest. */
  private releaseOldest(): void {
    for (const key of this.until.keys()) {
      this.release(key);
      return;
    }
  }

  /** Lets go of every key (the local shares are cut afresh: their states no longer count). */
  releaseAll(): void {
    for (const key of [...this.until.keys()]) this.release(key);
  }

  private sweep(nowMs: number): void {
    const expired: string[] = [];
    for (const [key, untilMs] of this.until) if (untilMs <= nowMs) expired.push(key);
    for (const key of expired) this.release(key);
  }

  private stopWhenEmpty(): void {
    if (this.until.size > 0 || this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
