/**
 * Shaping (leaky bucket `mode: "shape"`) when the client goes away while its verdict is being
 * made (a store that answers slowly: Redis under load): by the time the store admits it with a
 * delay, the response has already closed, and no further `close` event comes. docs/middleware.md
 * says a client that disconnects while held gives its place back (`limiter.refund`): it must, at
 * once, rather than wait out its delay (an hour here) holding its place in the queue. On every
 * adapter through real HTTP. No timings: the store's consume waits on the test's own gate until
 * the server has seen the connection close.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore, type Store } from "ratekeeper";
import type { BindOptions, BoundStore } from "../src/store.js";
import type { ResolvedLimit } from "../src/core/options.js";
import { until } from "../../../test-support/process.js";
import { FRAMEWORKS } from "./http-gone-support.js";
import { httpAbandon } from "./http-support.js";

/** A memory store whose consumes wait for `open()` while `gated`, and which counts refunds. */
class SlowDecisions implements Store {
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

let seq = 0;

describe.each(Object.keys(FRAMEWORKS))("%s: shaping, the client gone while its verdict was made", (name) => {
  it("gives its place in the queue back at once (the delay is an hour)", async () => {
    const store = new SlowDecisions();
    const limiter = { algorithm: "leaky-bucket", mode: "shape", limit: 1, window: "1h", capacity: 10, store, namespace: `s${++seq}` };
    const app = await (FRAMEWORKS[name] as (typeof FRAMEWORKS)[string])({ limiter, maxDelayMs: 86_400_000 });
    try {
      expect((await fetch(app.url)).status).toBe(200); // the first: no wait
      store.gated = true;
      await httpAbandon(app.url, {}, () => store.waiting === 1);
      await until(() => app.closed() === 2, "the server to see the client gone", 400, 5);
      store.open(); // admitted, an hour from now, after the client left
      await until(() => store.refunds === 1, "the place given back", 400, 5);
      expect(app.served()).toBe(1);
    } finally {
      store.open();
      await app.close();
    }
  });
});
