/**
 * The memory store's default clock: one Date.now() reading per turn of the event loop (and per
 * USES_PER_READING decisions), and a replaced Date.now (fake timers, stubs) seen on every call.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { MemoryStore, RateLimiter } from "../src/index.js";
import { loopNowMs, USES_PER_READING } from "../src/stores/loop-clock.js";

/** Spins until the real clock has moved past `t` (a few ms at most; no timing is asserted). */
function waitPast(t: number): void {
  while (Date.now() <= t) {
    /* spin */
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("loopNowMs", () => {
  it("shares one reading among the decisions of a turn, and reads again after USES_PER_READING of them", async () => {
    await nextTurn();
    const first = loopNowMs();
    waitPast(first);
    for (let i = 1; i < USES_PER_READING; i++) expect(loopNowMs()).toBe(first);
    expect(loopNowMs()).toBeGreaterThan(first);
  });

  it("reads afresh in the next turn of the event loop", async () => {
    await nextTurn();
    const first = loopNowMs();
    waitPast(first);
    expect(loopNowMs()).toBe(first);
    await nextTurn();
    expect(loopNowMs()).toBeGreaterThan(first);
    // A reading taken in a setImmediate callback (as here) is discarded by an immediate of the
    // NEXT iteration's check phase, so a timer that fires in that iteration's timers phase, before
    // it, may still see it: at most one turn old, as documented. Once that turn is over, a timer
    // callback reads afresh.
    const t = loopNowMs();
    waitPast(t);
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    expect(loopNowMs()).toBeGreaterThanOrEqual(t);
    await nextTurn();
    const u = loopNowMs();
    waitPast(u);
    await nextTurn();
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    expect(loopNowMs()).toBeGreaterThan(u);
  });

  it("follows a replaced Date.now on every call", () => {
    let fake = 1_000;
    vi.spyOn(Date, "now").mockImplementation(() => fake);
    expect(loopNowMs()).toBe(1_000);
    fake = 2_000;
    expect(loopNowMs()).toBe(2_000);
    fake = 500;
    expect(loopNowMs()).toBe(500);
  });

  it("a MemoryStore limiter sees vi.setSystemTime at once (fake timers)", async () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date("2030-01-01T00:00:00Z"));
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 1, window: "1h", store: new MemoryStore({ sweepIntervalMs: 0 }) });
    expect((await limiter.consume("k")).allowed).toBe(true);
    expect((await limiter.consume("k")).allowed).toBe(false);
    vi.setSystemTime(new Date("2030-01-01T01:00:00Z"));
    expect((await limiter.consume("k")).allowed).toBe(true);
    vi.setSystemTime(new Date("2030-01-01T01:59:59.999Z"));
    const d = await limiter.consume("k");
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBe(1);
  });
});
