/**
 * A Redis store's `timeoutMs` (any whole number of ms is accepted) must not reach a timer longer
 * than a timer holds (2^31 - 1 ms, about 24.8 days): node runs such a timer after 1 ms (a
 * setInterval every millisecond). vitest's fake timers do the same, so these tests see it without
 * waiting: RedisStore's watchdog (stores/redis/lanes.ts, a check every timeoutMs / 4) and
 * HttpRedisStore's per-call timeout (stores/redis-http/store.ts).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { RateLimiter } from "../src/index.js";
import { HttpRedisStore } from "../src/stores/redis-http/index.js";
import { Lanes, type WaitingCall } from "../src/stores/redis/lanes.js";

const DAY = 86_400_000;

afterEach(() => {
  vi.useRealTimers();
});

describe("a timeoutMs past what timers hold", () => {
  it("RedisStore's watchdog does not check every millisecond while a call waits (timeoutMs 100 days)", () => {
    vi.useFakeTimers();
    const stalls: unknown[] = [];
    const lanes = new Lanes(false, 100 * DAY, (lane) => stalls.push(lane));
    const abandoned: Error[] = [];
    const call: WaitingCall = { abandon: (e) => abandoned.push(e), prev: undefined, next: undefined, listed: false };
    lanes.begin(lanes.of("rk:{ns:k}"), call);
    const immediate = vi.spyOn(globalThis, "setImmediate");
    vi.advanceTimersByTime(1000);
    // The check is asked for from the watchdog's timer (in a setImmediate): a quarter of the
    // timeout, capped, is 24.8 days away, so none in the first second.
    expect(immediate).toHaveBeenCalledTimes(0);
    expect(stalls).toEqual([]);
    expect(abandoned).toEqual([]);
  });

  it("HttpRedisStore does not time a call out after 1 ms (timeoutMs 30 days)", async () => {
    vi.useFakeTimers();
    let answer: (reply: unknown) => void = () => undefined;
    let called: () => void = () => undefined;
    const sent = new Promise<void>((resolve) => (called = resolve));
    const client = {
      evalsha: () =>
        new Promise<unknown>((resolve) => {
          answer = resolve;
          called();
        }),
      eval: () => Promise.reject(new Error("not used")),
    };
    const store = new HttpRedisStore({ client, timeoutMs: 30 * DAY, failure: "throw" });
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 5, window: 1000, store, clock: () => 1_763_740_800_000 });
    const decision = limiter.consume("k");
    decision.catch(() => undefined);
    await sent; // the script's hash is made first (WebCrypto, off the timers)
    await vi.advanceTimersByTimeAsync(1000);
    answer([1, 4, 0, 1000, 0]); // Redis's reply, a second later
    const d = await decision;
    expect(d.allowed).toBe(true);
    expect(d.remaining).toBe(4);
  });
});
