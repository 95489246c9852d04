/**
 * A RedisStore's circuit breakers at work. Every call to Redis goes through
 * {@link Breakers.exchange}: its lane's watchdog (lanes.ts) watches it, and what becomes of it
 * drives the lane's `Breaker` (breaker.ts, pure state): any reply closes it, errors or a
 * stall open it. An open lane gets one probe after its pause. The store-wide state, the worst
 * lane's, is what `RedisStore.state` shows and `onStateChange` hears about.
 */
import { isKeyValueError } from "./client.js";
import { Lanes, type Lane, type WaitingCall } from "./lanes.js";
import type { BreakerState, ResolvedRedisOptions } from "./options.js";

/** A trivial script to ask whether a lane's master answers again (routed by its key). */
export const PROBE = "return 1";

/** The lanes of one store and their breakers, driven by the calls made on them. */
export class Breakers {
  readonly lanes: Lanes;
  private aggregate: BreakerState = "closed";

  /**
   * @param onClosed a lane's breaker closed: Redis answers it again (the store reconciles what
   *   was admitted without it)
   */
  constructor(
    private readonly opts: ResolvedRedisOptions,
    private readonly onClosed: (lane: Lane) => void,
  ) {
    this.lanes = new Lanes(opts.shim.isCluster, opts.timeoutMs, (lane) => this.stalled(lane));
  }

  /** The store-wide state: `open` when any lane is open, else `half-open` when any is probing. */
  get state(): BreakerState {
    return this.aggregate;
  }

  /**
   * One call to Redis on `lane`, watched by the lane's watchdog: it rejects with a
   * RedisTimeoutError when the lane stalls. A reply that arrives after that goes to `onLate`
   * (to give back what it charged). Every reply, early or late, tells the breaker Redis answers.
   * @param decisions how many decisions the call carries, for `onRoundTrip`
   */
  exchange<T>(lane: Lane, send: () => Promise<T>, decisions: number, onLate?: (value: T) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let answered = false;
      const call: WaitingCall = {
        prev: undefined,
        next: undefined,
        listed: false,
        abandon(error) {
          if (answered) return;
          answered = true;
          reject(error);
        },
      };
      const t0 = this.lanes.begin(lane, call);
      send().then(
        (value) => {
          this.replied(lane, this.lanes.end(lane, call) - t0, decisions);
          if (answered) {
            if (onLate) onLate(value);
            return;
          }
          answered = true;
          resolve(value);
        },
        (e: unknown) => {
          this.lanes.end(lane, call);
          if (answered) return;
          answered = true;
          const error = e instanceof Error ? e : new Error(String(e));
          this.errored(lane, error);
          reject(error);
        },
      );
    });
  }

  /** A reply (early or late) came on `lane` after `ms`, for a call carrying `decisions`: Redis answers. */
  replied(lane: Lane, ms: number, decisions: number): void {
    this.roundTrip(ms, decisions);
    this.transition(lane, lane.breaker.succeeded(), "Redis answered");
  }

  /**
   * A call on `lane` failed (not by the watchdog: that is {@link Breakers.stalled}). An error about
   * one key's value (isKeyValueError) is Redis answering: it counts as a reply, not a failure.
   */
  errored(lane: Lane, error: Error): void {
    if (isKeyValueError(error)) this.transition(lane, lane.breaker.succeeded(), "Redis answered");
    else this.transition(lane, lane.breaker.failed(false, performance.now()), error.message);
  }

  /** Opens the breaker at once when the client reports its connection lost (single Redis). */
  checkConnection(): void {
    if (this.opts.shim.isCluster || !this.opts.shim.lost()) return;
    const lane = this.lanes.of("");
    if (lane.breaker.state === "closed") this.transition(lane, lane.breaker.failed(true, performance.now()), "connection lost");
  }

  private roundTrip(ms: number, decisions: number): void {
    const f = this.opts.onRoundTrip;
    if (f === undefined) return;
    try {
      f(ms, decisions);
    } catch {
      /* a failing observer must not fail the decision */
    }
  }

  /** The lane's watchdog timed its calls out: Redis is down for it. */
  private stalled(lane: Lane): void {
    this.transition(lane, lane.breaker.failed(true, performance.now()), `no reply for ${this.opts.timeoutMs} ms`);
  }

  /** Applies a breaker change: the probe schedule, reconciliation, and the store-wide state and its event. */
  private transition(lane: Lane, to: BreakerState | undefined, cause: string): void {
    if (to === undefined) return;
    if (to === "open") this.scheduleProbe(lane);
    if (to === "closed") this.onClosed(lane);
    const lanes = this.lanes.all();
    const next: BreakerState = lanes.some((l) => l.breaker.state === "open")
      ? "open"
      : lanes.some((l) => l.breaker.state === "half-open")
        ? "half-open"
        : "closed";
    if (next === this.aggregate) return;
    const from = this.aggregate;
    this.aggregate = next;
    const f = this.opts.onStateChange;
    if (f === undefined) return;
    try {
      f({ from, to: next, cause });
    } catch {
      /* a failing observer must not break the breaker */
    }
  }

  /** After the open breaker's pause, goes half-open and sends one probe on the lane. */
  private scheduleProbe(lane: Lane): void {
    if (lane.probing) return;
    lane.probing = true;
    const t = setTimeout(
      () => {
        lane.probing = false;
        if (!lane.breaker.probe()) return;
        this.transition(lane, "half-open", "probing");
        const key = lane.probeKey || `${this.opts.prefix}probe`;
        this.exchange(lane, () => this.opts.shim.eval(PROBE, [key], []), 0).then(
          () => undefined, // exchange closed the breaker
          () => undefined, // exchange (or the watchdog) opened it again, which schedules the next probe
        );
      },
      Math.max(0, lane.breaker.probeAtMs - performance.now()),
    );
    t.unref?.();
  }
}
