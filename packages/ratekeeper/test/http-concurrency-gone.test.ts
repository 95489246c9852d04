/**
 * The middleware's `concurrency` option when the client goes away while its lease is being
 * acquired (a store that answers slowly: Redis under load): by the time the lease is granted, the
 * response has already closed. The lease must go back all the same, on every adapter through real
 * HTTP. No timings: the store's acquire waits on the test's own gate until the server has seen
 * the connection close.
 */
import { describe, expect, it } from "vitest";
import { ConcurrencyLimiter } from "ratekeeper";
import { until } from "../../../test-support/process.js";
import { SlowLeases } from "../../../test-support/slow-leases.js";
import { FRAMEWORKS } from "./http-gone-support.js";
import { httpAbandon } from "./http-support.js";

let seq = 0;

describe.each(Object.keys(FRAMEWORKS))("%s: concurrency, the client gone while its lease was acquired", (name) => {
  it("the lease goes back once granted", async () => {
    const store = new SlowLeases();
    const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 3_600_000, store, namespace: `g${++seq}` });
    const app = await (FRAMEWORKS[name] as (typeof FRAMEWORKS)[string])({ concurrency: pool });
    try {
      await httpAbandon(app.url, {}, () => store.waiting === 1);
      await until(() => app.closed() === 1, "the server to see the client gone", 400, 5);
      store.open();
      await until(() => store.answered === 1, "the acquire to be answered", 400, 5);
      expect(store.granted).toBe(1); // granted after the client left
      // The lease is granted after the client left; whether or not the handler then runs, the
      // slot must come back (not an hour later, when the lease expires).
      await until(async () => (await pool.peek("127.0.0.1")).remaining === 1, "the lease back", 200, 10);
      expect(app.served()).toBeLessThanOrEqual(1);
    } finally {
      store.open();
      await app.close();
    }
  });
});
