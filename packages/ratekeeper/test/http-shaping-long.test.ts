/**
 * Shaping with a `maxDelayMs` past what a timer holds (2^31 - 1 ms, about 24.8 days): a wait the
 * limiter grants up to it would reach setTimeout, which node runs after 1 ms, so the request
 * went on at once, not shaped at all. The middleware holds at most that long: a longer wait is a
 * 429 like any queue longer than `maxDelayMs`. On every adapter through real HTTP; nothing waits.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { FRAMEWORKS } from "./http-gone-support.js";

let seq = 0;

describe.each(Object.keys(FRAMEWORKS))("%s: shaping, a maxDelayMs past what timers hold", (name) => {
  it("refuses a wait of 60 days (maxDelayMs 100 days) rather than pass the request on after 1 ms", async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const limiter = { algorithm: "leaky-bucket", mode: "shape", limit: 1, window: "60d", capacity: 10, store, namespace: `l${++seq}` };
    const app = await (FRAMEWORKS[name] as (typeof FRAMEWORKS)[string])({ limiter, maxDelayMs: 100 * 86_400_000 });
    try {
      expect((await fetch(app.url)).status).toBe(200); // the first: no wait
      expect((await fetch(app.url)).status).toBe(429); // the next: 60 days in the queue
      expect(app.served()).toBe(1);
    } finally {
      await app.close();
    }
  });
});
