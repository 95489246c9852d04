import type { Decision, Outcome } from "../../core/decision.js";
import { RateLimitStoreError } from "../../core/errors.js";
import { isNoScript } from "./client.js";
import type { FastCall } from "./fast-call.js";
import type { Lane, WaitingCall } from "./lanes.js";
import type { RedisStore } from "./store.js";
import type { DecisionCall } from "./without-redis.js";

/** What a {@link FastOp} needs of the limiter's table (table.ts) that sent it. */
export interface FastOwner {
  readonly store: RedisStore;
  /** The decision of `call` from the outcome the script's reply gave (it also remembers a denial). */
  outcomeDecision(out: Outcome, call: DecisionCall): Decision;
  /** The failure policy's decision of `call` when its script call failed, timed out, or replied something unreadable. */
  failedDecision(e: unknown, call: DecisionCall): Promise<Decision>;
  /** `call`, a consume, was admitted by the script after its decision was given up on: give it back. */
  lateAdmit(call: DecisionCall): void;
}

/**
 * One unbatched decision by the script's fast path, in flight: the call to Redis, its place in
 * its lane's watchdog list, its part in the lane's breaker, and the decision it settles with.
 *
 * Why one object: at hundreds of decisions in flight, the client's CPU per decision was mostly
 * the garbage collector's (46% of its samples at 256 in flight), and a decision made about
 * 2.4 KB of garbage of ratekeeper's own: a promise and two closures per layer (the breaker's
 * exchange, the NOSCRIPT retry, the store's read of the reply), a `Set` entry, an async frame.
 * Here the layers are methods of one object with two closures (the reply's handlers), and the
 * caller's promise is the only one made besides the client's (docs/benchmarks/redis.md).
 * The semantics are {@link Breakers.exchange}'s: the watchdog abandons the call when the lane
 * stalls (the failure policy answers), a reply that comes after that goes to `lateAdmit`
 * when it admitted, and every reply, early or late, tells the breaker that Redis answers.
 */
export class FastOp implements WaitingCall {
  prev: WaitingCall | undefined = undefined;
  next: WaitingCall | undefined = undefined;
  listed = false;
  /** The caller has its decision (from the reply, the failure policy, or the watchdog). */
  private settled = false;
  /** A NOSCRIPT reply was met, and the script is being sent with EVAL. */
  private loading = false;
  private t0 = 0;
  private resolve: (d: Decision | Promise<Decision>) => void = noop;
  private readonly onReply = (raw: unknown): void => this.replied(raw);
  private readonly onError = (e: unknown): void => this.failed(e);

  constructor(
    private readonly owner: FastOwner,
    private readonly fast: FastCall,
    private readonly lane: Lane,
    private readonly keys: string[],
    private readonly args: string[],
    private readonly call: DecisionCall,
    private readonly now: number,
  ) {}

  /** Sends the call; the promise settles with the decision (or the failure policy's rejection). */
  start(): Promise<Decision> {
    const p = new Promise<Decision>((resolve) => {
      this.resolve = resolve;
    });
    const store = this.owner.store;
    this.t0 = store.lanes.begin(this.lane, this);
    store.opts.shim.evalshaBuffer!(this.fast.sha, this.keys, this.args).then(this.onReply, this.onError);
    return p;
  }

  /** The watchdog gave the call up (its lane stalled): the failure policy answers. */
  abandon(error: Error): void {
    if (this.settled) return;
    this.settle(this.owner.failedDecision(error, this.call));
  }

  private replied(raw: unknown): void {
    const store = this.owner.store;
    const t1 = store.lanes.end(this.lane, this);
    store.breakers.replied(this.lane, t1 - this.t0, 1);
    const call = this.call;
    if (this.settled) {
      if (call.op === "consume" && this.fast.admitted(raw, this.now, call.cost, call.maxDelayMs)) this.owner.lateAdmit(call);
      return;
    }
    let out: Outcome;
    try {
      out = this.fast.read(raw, this.now, call.cost, call.maxDelayMs);
    } catch (e) {
      const error = new RateLimitStoreError(`RedisStore: unexpected script reply (${(e as Error).message})`);
      this.settle(this.owner.failedDecision(error, call));
      return;
    }
    this.settle(this.owner.outcomeDecision(out, call));
  }

  private failed(e: unknown): void {
    const store = this.owner.store;
    if (!this.loading && isNoScript(e)) {
      // The script cache was flushed (a restart, a failover): send the script, then go on.
      this.loading = true;
      store.runLoading(this.lane, this.fast.script, this.keys, this.args, true).then(this.onReply, this.onError);
      return;
    }
    store.lanes.end(this.lane, this);
    if (this.settled) return;
    const error = e instanceof Error ? e : new Error(String(e));
    store.breakers.errored(this.lane, error);
    this.settle(this.owner.failedDecision(error, this.call));
  }

  private settle(d: Decision | Promise<Decision>): void {
    this.settled = true;
    this.owner.store.leave();
    this.resolve(d);
  }
}

function noop(): void {}
