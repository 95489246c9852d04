/**
 * A memory store whose consumes wait for `open()` while `gated` (a store that answers slowly:
 * Redis under load), and which counts refunds: for the tests of a client gone while its verdict
 * is made (shaping on every adapter, node:http2). No timings: the test opens the gate once the
 * server has seen the client leave.
 */
import { MemoryStore, type BindOptions, type BoundStore, type ResolvedLimit, type Store } from "ratekeeper";

/** A memory store whose consumes wait for `open()` while `gated`, and which counts refunds. */
export class SlowDecisions implements Store {
  private readonly inner = new MemoryStore({ sweepIntervalMs: 0 });
  gated = false;
  waiting = 0;
  refunds = 0;
  private waiters: Array<() => void> = [];

  bind(limits: readonly ResolvedLimit[], namespace: string, options?: BindOptions): BoundStore {
    const b = this.inner.bind(limits, namespace, options);
    return {
      consume: async (...a) => {
        if (this.gated) {
          this.waiting++;
          await new Promise<void>((r) => this.waiters.push(r));
          this.waiting--;
        }
        return b.consume(...a);
      },
      peek: (...a) => b.peek(...a),
      refund: (...a) => {
        this.refunds++;
        return b.refund(...a);
      },
      reset: (...a) => b.reset(...a),
    };
  }

  open(): void {
    this.gated = false;
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}
