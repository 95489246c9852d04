/**
 * Redis's clock, read from this process without asking Redis for every decision.
 *
 * The store decides by the Redis server's time (`TIME`) so that app servers with skewed clocks
 * agree. Reading `TIME` inside every script call costs a command and about 0.5-1 us of Redis
 * CPU per call; instead, one call in a while reads it (the script returns the reading) and this
 * class keeps the offset between Redis's clock and the process's monotonic clock
 * (`performance.now()`, which the system clock's steps do not move). Every other call sends
 * `monotonic + offset` as its time. It is still Redis's clock: an app server whose own clock is
 * 15 minutes off sends the same times as one that is right.
 *
 * Precision: a reading taken by a call sent at t0 and answered at t1 is off by at most
 * (t1 - t0) / 2. The offset kept is the reading with the smallest such error, aged by a drift
 * allowance, and a reading is taken again every {@link RESAMPLE_MS}; so app servers on one
 * network agree to a fraction of a millisecond, the same order as the milliseconds the
 * algorithms count in. (Keys still expire by Redis's own clock: their TTLs are durations.)
 */

/** How often a call reads `TIME` again (ms of the monotonic clock). */
export const RESAMPLE_MS = 1_000;
/** How fast a kept reading is assumed to grow stale: 100 ppm, far above NTP-disciplined drift. */
const DRIFT_PER_MS = 1e-4;

export class ServerClock {
  /** Redis time minus monotonic time, in ms; valid when `error` is finite. */
  private offset = 0;
  /** Half the round trip of the reading behind `offset` (ms). */
  private error = Number.POSITIVE_INFINITY;
  /** Monotonic time of that reading. */
  private takenAt = 0;
  /** Monotonic time of the last call sent to take a reading. */
  private askedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly monotonicMs: () => number = () => performance.now()) {}

  /**
   * The time to send with a call (integer ms since the epoch by Redis's clock), or `undefined`
   * when a call should read `TIME` itself: before the first reading, and once per
   * {@link RESAMPLE_MS} after that. It stays `undefined` until a call that reads `TIME` is sent
   * ({@link ServerClock.asking}), so a caller that cannot read `TIME` itself (the fast path) can
   * leave it to the next one that can.
   */
  now(): number | undefined {
    const t = this.monotonicMs();
    if (this.error === Number.POSITIVE_INFINITY || t - this.askedAt >= RESAMPLE_MS) return undefined;
    return Math.floor(t + this.offset);
  }

  /** A call that reads `TIME` is being sent: the others go on with the offset kept for {@link RESAMPLE_MS}. */
  asking(): void {
    this.askedAt = this.monotonicMs();
  }

  /** The monotonic time now, for {@link ServerClock.reading}'s `sentAt`. */
  mark(): number {
    return this.monotonicMs();
  }

  /**
   * A call sent at `sentAt` (from {@link ServerClock.mark}) came back with Redis's `TIME` in
   * microseconds since the epoch. Keeps it if it is more precise than the aged reading kept.
   */
  reading(sentAt: number, serverUs: number): void {
    if (sentAt > this.askedAt) this.askedAt = sentAt;
    const back = this.monotonicMs();
    const error = (back - sentAt) / 2;
    const aged = this.error + (back - this.takenAt) * DRIFT_PER_MS;
    if (!(error <= aged)) return;
    this.offset = serverUs / 1000 - (sentAt + back) / 2;
    this.error = error;
    this.takenAt = back;
  }
}
