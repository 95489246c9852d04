import { MAX_TIMER_MS } from "../../core/max-timer.js";
import { Breaker } from "./breaker.js";
import { hashSlot } from "./slot.js";

/**
 * A call waiting for Redis: the watchdog abandons it (with a timeout error) when its lane stalls.
 * The lane keeps its waiting calls in a list threaded through the calls themselves (`prev`,
 * `next`), so a call joins and leaves it without allocating (a `Set` cost about 240 bytes of
 * garbage per call as it grew and shrank, at hundreds of calls in flight).
 */
export interface WaitingCall {
  abandon(error: Error): void;
  /** The lane's list links: set by {@link Lanes}, undefined while the call is not in a list. */
  prev: WaitingCall | undefined;
  next: WaitingCall | undefined;
  /** Whether the call is in its lane's list (the watchdog may have taken it out already). */
  listed: boolean;
}

/**
 * One ordered stream of replies from Redis: the connection of a single Redis, or one hash slot of
 * a cluster (every call of a slot goes to the same master over the same connection). Replies on a
 * lane come in order, so while any reply keeps arriving, Redis is answering this lane's calls.
 */
export class Lane {
  readonly breaker = new Breaker();
  /** The calls waiting on this lane, oldest first (a list through WaitingCall.prev/next), and their count. */
  first: WaitingCall | undefined = undefined;
  last: WaitingCall | undefined = undefined;
  waiting = 0;
  /** When the lane last heard from Redis, or became busy (performance.now() ms). */
  lastProgressMs = 0;
  /** A key of this lane, for the breaker's probe (it must reach the same master). */
  probeKey = "";
  /** A probe is scheduled or out. */
  probing = false;
  /** A reconciliation is scheduled for admissions made while the breaker stayed closed. */
  reconcileQueued = false;
  /** Scripts being sent with EVAL on this lane (by SHA): other calls that meet NOSCRIPT wait for them. */
  readonly loading = new Map<string, Promise<void>>();
  constructor(readonly id: number) {}
}

/** The breaker of a call's lane is open: the failure policy answers without a call. */
export class RedisDownError extends Error {
  override readonly name = "RedisDownError";
  constructor() {
    super("Redis is down (circuit breaker open)");
  }
}

let down: RedisDownError | undefined;

/**
 * The one {@link RedisDownError} that every call refused by an open breaker is rejected with
 * inside the store, made on first need. While Redis is down every decision is refused so, and
 * an Error made per call (with its stack trace) cost about 5 times the failure policy's whole
 * answer; yet no one sees it unless the policy is `"throw"`, whose caller gets a new
 * RateLimitStoreError with it as `cause`. Shared, it was not thrown from any one place: its stack
 * is its first line only; and frozen, so that whoever holds it cannot change it for the others.
 */
export function redisDown(): RedisDownError {
  if (down === undefined) {
    const e = new RedisDownError();
    e.stack = `${e.name}: ${e.message}`;
    down = Object.freeze(e);
  }
  return down;
}

/** No reply on the lane for `ms` while calls waited. */
export class RedisTimeoutError extends Error {
  override readonly name = "RedisTimeoutError";
  constructor(ms: number) {
    super(`Redis sent no reply for ${ms} ms while calls waited`);
  }
}

/**
 * The lanes of one store and the watchdog that times them out. The timeout measures Redis, not
 * this process: a lane stalls only when it has calls waiting and no reply has arrived for
 * `timeoutMs`. The watchdog's check runs in a `setImmediate` after its timer fires: when the
 * event loop was blocked, Node runs expired timers before it reads the sockets, so checking
 * straight from the timer would blame Redis for replies that are already here, unread. The
 * immediate runs after the poll phase has read them.
 */
export class Lanes {
  private readonly lanes = new Map<number, Lane>();
  private readonly single: Lane | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  /** Lanes with calls waiting: the only ones the watchdog looks at. */
  private readonly busy = new Set<Lane>();

  /**
   * @param cluster whether keys map to lanes by hash slot (else one lane)
   * @param timeoutMs silence that stalls a busy lane; 0: never
   * @param onStall told about each stalled lane, after its waiting calls were abandoned
   */
  constructor(
    cluster: boolean,
    private readonly timeoutMs: number,
    private readonly onStall: (lane: Lane) => void,
  ) {
    this.single = cluster ? undefined : new Lane(0);
  }

  /** The lane of a Redis key (with its hash tag). */
  of(redisKey: string): Lane {
    if (this.single !== undefined) return this.single;
    const slot = hashSlot(redisKey);
    let lane = this.lanes.get(slot);
    if (lane === undefined) {
      lane = new Lane(slot);
      this.lanes.set(slot, lane);
    }
    return lane;
  }

  /** Every lane in use. */
  all(): Lane[] {
    return this.single !== undefined ? [this.single] : [...this.lanes.values()];
  }

  /** A call was sent on `lane`; returns when (performance.now() ms). */
  begin(lane: Lane, call: WaitingCall): number {
    const now = performance.now();
    if (lane.waiting === 0) {
      lane.lastProgressMs = now;
      this.busy.add(lane);
    }
    lane.waiting++;
    call.next = undefined;
    call.prev = lane.last;
    if (lane.last !== undefined) lane.last.next = call;
    else lane.first = call;
    lane.last = call;
    call.listed = true;
    if (this.timer === undefined && this.timeoutMs > 0) this.start();
    return now;
  }

  /** A reply arrived on `lane` for a call that goes on (a NOSCRIPT answer before its EVAL). */
  progress(lane: Lane): void {
    lane.lastProgressMs = performance.now();
  }

  /**
   * A reply (or error) arrived for a call on `lane`: progress, whether or not the call was still
   * waiting. Returns the time it was read (performance.now() ms), for the round trip.
   */
  end(lane: Lane, call: WaitingCall): number {
    const now = performance.now();
    lane.lastProgressMs = now;
    if (call.listed) {
      call.listed = false;
      if (call.prev !== undefined) call.prev.next = call.next;
      else lane.first = call.next;
      if (call.next !== undefined) call.next.prev = call.prev;
      else lane.last = call.prev;
      call.prev = call.next = undefined;
      if (--lane.waiting === 0) this.busy.delete(lane);
    }
    return now;
  }

  /**
   * The watchdog's timer keeps running while lanes were busy lately and stops at its first tick
   * that finds none: stopping it the moment the last call returned, and starting it again with
   * the next, cost a setInterval and a clearInterval per decision at one call in flight.
   */
  private stopWhenIdle(): boolean {
    if (this.busy.size > 0 || this.timer === undefined) return false;
    clearInterval(this.timer);
    this.timer = undefined;
    return true;
  }

  private start(): void {
    // A quarter of the timeout between checks: a stall is seen within 1.25 x timeoutMs of its start
    // (capped at what a timer holds: with a timeoutMs over about 99 days, it would run every ms).
    const every = Math.min(MAX_TIMER_MS, Math.max(1, Math.floor(this.timeoutMs / 4)));
    this.timer = setInterval(() => setImmediate(() => this.check()), every);
    this.timer.unref?.();
  }

  private check(): void {
    if (this.stopWhenIdle()) return;
    const now = performance.now();
    for (const lane of [...this.busy]) {
      if (now - lane.lastProgressMs < this.timeoutMs) continue;
      const calls: WaitingCall[] = [];
      for (let c = lane.first; c !== undefined;) {
        const next = c.next;
        c.listed = false;
        c.prev = c.next = undefined;
        calls.push(c);
        c = next;
      }
      lane.first = lane.last = undefined;
      lane.waiting = 0;
      this.busy.delete(lane);
      const err = new RedisTimeoutError(this.timeoutMs);
      for (const c of calls) c.abandon(err);
      this.onStall(lane);
    }
  }
}
