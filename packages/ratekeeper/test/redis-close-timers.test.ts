/**
 * RedisStore.close() stops every timer the store started: the `"degraded"` policy keeps its
 * shares (rate limits and leases) in a memory store of its own, made on first need, whose sweep
 * runs on an interval timer; close() left it running, holding that store and its keys for the
 * process's life (unref'd, so it held no process open). No Redis needed: a client whose every call fails puts the store in its policy.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConcurrencyLimiter, RateLimiter } from "ratekeeper";
import { RedisStore, type RedisClientLike } from "ratekeeper/redis";

const down: RedisClientLike = {
  evalsha: () => Promise.reject(new Error("Connection is closed.")),
  eval: () => Promise.reject(new Error("Connection is closed.")),
  del: () => Promise.reject(new Error("Connection is closed.")),
};

afterEach(() => {
  vi.useRealTimers();
});

describe("RedisStore.close(), the degraded policy's own memory store", () => {
  it.each(["lease", "rate limit"])("stops its sweep timer (a %s answered locally)", async (what) => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const store = new RedisStore({ client: down, failure: "degraded", instances: 1 });
    if (what === "lease") {
      const pool = new ConcurrencyLimiter({ limit: 2, leaseMs: 30_000, store });
      expect((await pool.acquire("k")).acquired).toBe(true);
    } else {
      const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 5, window: "1m", store });
      expect((await limiter.consume("k")).allowed).toBe(true);
    }
    expect(vi.getTimerCount()).toBeGreaterThan(0); // the local store's sweep
    await store.close();
    // The timers that stop by themselves once idle (the call watchdog, the degraded policy's kept
    // keys, swept when their window is over) get the time to; the local store's sweep never did.
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(60_000);
      await new Promise((r) => setImmediate(r));
    }
    expect(vi.getTimerCount()).toBe(0);
  });
});
