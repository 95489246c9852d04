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
import { until } from "../../../test-support/process.js";
import { SlowDecisions } from "../../../test-support/slow-decisions.js";
import { FRAMEWORKS } from "./http-gone-support.js";
import { httpAbandon } from "./http-support.js";

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
