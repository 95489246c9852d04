/**
 * A memory store whose lease acquires wait for `open()` (one gate for all of them): a store that
 * answers slowly (Redis under load), for the tests of a client gone while its lease is acquired
 * (the middleware's `concurrency` option, the service's `/v1/leases/acquire`). No timings: the
 * test opens the gate once the server has seen the connection close.
 */
import { MemoryStore, type BoundLeases, type ClockOptions, type LeaseAnswer, type Store } from "ratekeeper";

export class SlowLeases implements Store {
  readonly inner = new MemoryStore({ sweepIntervalMs: 0 });
  /** Acquires waiting at the gate. */
  waiting = 0;
  /** Acquires answered, and granted. */
  answered = 0;
  granted = 0;
  private waiters: Array<() => void> = [];

  bind(...a: Parameters<MemoryStore["bind"]>): ReturnType<MemoryStore["bind"]> {
    return this.inner.bind(...a);
  }

  bindLeases(limit: number, namespace: string, options?: ClockOptions): BoundLeases {
    const b = this.inner.bindLeases(limit, namespace, options);
    return {
      acquire: async (key, id, leaseMs, nowMs): Promise<LeaseAnswer> => {
        this.waiting++;
        await new Promise<void>((r) => this.waiters.push(r));
        this.waiting--;
        const a = await b.acquire(key, id, leaseMs, nowMs);
        this.answered++;
        if (a.ok) this.granted++;
        return a;
      },
      renew: (...a) => b.renew(...a),
      release: (...a) => b.release(...a),
      count: (...a) => b.count(...a),
    };
  }

  /** Lets every waiting acquire go on. */
  open(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}
