import type { Decision, Outcome } from "../../core/decision.js";
import type { Pending } from "./batcher.js";
import type { FastOwner } from "./fast-op.js";
import type { DecisionCall } from "./without-redis.js";

/** What a {@link QueuedDecision} needs of the limiter's table (table.ts) besides {@link FastOwner}'s. */
export interface QueuedOwner extends FastOwner {
  /** The decision of `call` from its slice of a general reply (5 integers per limit); also remembers a denial. */
  generalDecision(outcome: readonly unknown[], call: DecisionCall): Decision;
  /** Queues `p` for a script call: its lane's batch, or a call of its own. */
  enqueue(p: Pending): void;
}

/**
 * A consume or peek waiting for a script call, batched or not: the {@link Pending} the batch
 * carries, and the caller's decision when the call is answered. The reply goes straight into the
 * decision (by the fast path, from the outcome the store computed; else from the decision's five
 * integers per limit), with no async frame, no second promise and no array in between: with
 * hundreds of decisions in flight their garbage is what the client's CPU goes to (fast-op.ts says
 * the same of the unbatched fast path). Leaves the store's pending count when settled.
 */
export class QueuedDecision implements Pending {
  readonly mode: "c" | "p";
  readonly key: string;
  readonly cost: number;
  readonly nowMs: number | undefined;
  readonly maxDelayMs: number | undefined;
  private settle: (d: Decision | Promise<Decision>) => void = noop;
  private settled = false;

  constructor(
    private readonly owner: QueuedOwner,
    private readonly call: DecisionCall,
  ) {
    this.mode = call.op === "consume" ? "c" : "p";
    this.key = call.key;
    this.cost = call.cost;
    this.nowMs = call.nowMs;
    this.maxDelayMs = call.maxDelayMs;
  }

  /** Queues the decision; the promise settles with it (or with the failure policy's rejection). */
  start(): Promise<Decision> {
    const p = new Promise<Decision>((resolve) => {
      this.settle = resolve;
    });
    this.owner.enqueue(this);
    return p;
  }

  resolve(outcome: readonly unknown[]): void {
    this.done(this.owner.generalDecision(outcome, this.call));
  }

  resolveOutcome(out: Outcome): void {
    this.done(this.owner.outcomeDecision(out, this.call));
  }

  reject(error: unknown): void {
    this.done(this.owner.failedDecision(error, this.call));
  }

  private done(d: Decision | Promise<Decision>): void {
    if (this.settled) return; // (a batch settles each of its decisions once; this keeps the pending count right regardless)
    this.settled = true;
    this.owner.store.leave();
    this.settle(d);
  }
}

function noop(): void {}
