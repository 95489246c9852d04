import type { Outcome } from "../../core/decision.js";

/** One decision (or refund, or reset) waiting for a script call. */
export interface Pending {
  readonly mode: "c" | "p" | "r" | "x";
  readonly key: string;
  readonly cost: number;
  readonly nowMs: number | undefined;
  /** Consumes of a shaping limiter: the longest wait the caller accepts (undefined: no bound). */
  readonly maxDelayMs: number | undefined;
  /** The decision's slice of the script reply: 5 integers per limit. */
  resolve(outcome: readonly unknown[]): void;
  /** When present, a fast-path reply's outcome goes here instead of {@link Pending.resolve} (read it at once: it is shared). */
  resolveOutcome?(out: Outcome): void;
  reject(error: unknown): void;
}

/** Script calls in flight per limiter; the decisions that arrive meanwhile wait and go together. */
const MAX_IN_FLIGHT = 2;

/**
 * Batching for one limiter on a single Redis: while `MAX_IN_FLIGHT` calls are out, new decisions
 * wait, then go together in one script call (each still atomic and all-or-nothing, in order).
 * At low load nothing waits, so each decision goes out at once on its own. Waiting decisions have
 * no timer of their own: the lanes' watchdog times out the calls in flight when Redis goes
 * silent, the breaker opens, and `isDown()` then answers everything still queued.
 */
export class Batcher {
  private readonly queue: Pending[] = [];
  private inFlight = 0;

  /**
   * @param send makes one script call for the batch; resolves once it is answered or failed
   * @param isDown whether Redis is known to be down (the breaker is not closed): queued decisions are then rejected with `downError()`
   */
  constructor(
    private readonly maxBatch: number,
    private readonly send: (batch: Pending[]) => Promise<void>,
    private readonly isDown: () => boolean,
    private readonly downError: () => Error,
  ) {}

  /** Whether no decision waits here for a script call. */
  get idle(): boolean {
    return this.queue.length === 0;
  }

  submit(p: Pending): void {
    this.queue.push(p);
    this.flush();
  }

  private flush(): void {
    if (this.queue.length > 0 && this.isDown()) {
      const err = this.downError();
      for (const p of this.queue.splice(0)) p.reject(err);
      return;
    }
    while (this.queue.length > 0 && this.inFlight < MAX_IN_FLIGHT) {
      this.inFlight++;
      void this.send(this.queue.splice(0, this.maxBatch)).finally(() => {
        this.inFlight--;
        this.flush();
      });
    }
  }
}
