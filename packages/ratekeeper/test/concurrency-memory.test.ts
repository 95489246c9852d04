/**
 * ConcurrencyLimiter on the memory store: its options (every bad one named), its bound on keys
 * holding leases, and the sweep that drops expired leases. The behaviour every store shares is in
 * concurrency-contract.ts.
 */
import { describe, expect, it, vi } from "vitest";
import { ConcurrencyLimiter, MemoryStore, RateLimiter, RateLimitConfigError, type Store } from "../src/index.js";

describe("ConcurrencyLimiter options", () => {
  it("defaults: a memory store, leases of 30 s, namespace from the limit", () => {
    const pool = new ConcurrencyLimiter({ limit: 10 });
    expect(pool.leaseMs).toBe(30_000);
    expect(pool.store).toBeInstanceOf(MemoryStore);
    expect(pool.namespace).toBe("c.a");
    expect(new ConcurrencyLimiter({ limit: 3, leaseMs: "2m" }).leaseMs).toBe(120_000);
  });

  it("names every bad option in one error", () => {
    const bad = () =>
      new ConcurrencyLimiter({
        limit: 0,
        leaseMs: "soon" as never,
        clock: 5 as never,
        namespace: "",
        store: { bind: () => undefined } as unknown as Store,
        leaseMS: 5,
      } as never);
    expect(bad).toThrow(RateLimitConfigError);
    try {
      bad();
    } catch (e) {
      const paths = (e as RateLimitConfigError).issues.map((i) => i.path).sort();
      expect(paths).toEqual(["clock", "leaseMS", "leaseMs", "limit", "namespace", "store"]);
      expect((e as Error).message).toMatch(/store: must be a store that holds leases/);
    }
    expect(() => new ConcurrencyLimiter(undefined as never)).toThrow(/options: must be an object/);
    expect(() => new ConcurrencyLimiter({ limit: 1.5 })).toThrow(/limit: must be a whole number of leases/);
  });

  it("a clock that returns no number is a RangeError naming the clock", async () => {
    const pool = new ConcurrencyLimiter({ limit: 1, clock: () => Number.NaN });
    await expect(pool.acquire("k")).rejects.toThrow(/clock: must return finite milliseconds/);
  });
});

describe("ConcurrencyLimiter on MemoryStore", () => {
  it("keeps no state for keys without leases; the sweep drops expired leases", async () => {
    const clock = { now: 1_000_000 };
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const pool = new ConcurrencyLimiter({ limit: 2, leaseMs: 1000, store, clock: () => clock.now });
    const a = await pool.acquire("a");
    await pool.acquire("b");
    await a.release();
    expect(store.sweep(clock.now)).toBe(0); // "a" was dropped by its release, "b" still holds
    clock.now += 1000;
    expect(store.sweep(clock.now)).toBe(1);
  });

  it("the sweep timer (process clock) never drops a lease that is live on the pool's injected clock", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const store = new MemoryStore({ sweepIntervalMs: 1_000 });
      const behind = Date.now() - 86_400_000; // a day behind the process's clock
      const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: "1h", store, clock: () => behind });
      expect((await pool.acquire("k")).acquired).toBe(true);
      await new RateLimiter({ algorithm: "gcra", limit: 5, window: "1s", store }).consume("x"); // starts the timer
      vi.advanceTimersByTime(1_000); // the timer sweeps at Date.now(): a day past the lease's start
      expect((await pool.acquire("k")).acquired).toBe(false); // still held on its own clock
    } finally {
      vi.useRealTimers();
    }
  });

  it("a step of the wall clock (NTP, a resumed VM) neither frees a held slot nor holds one past its lease", async () => {
    const real = Date.now.bind(Date);
    const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 60_000, store: new MemoryStore({ sweepIntervalMs: 0 }) });
    const now = vi.spyOn(Date, "now");
    try {
      const a = await pool.acquire("k");
      expect(a.acquired).toBe(true);
      now.mockImplementation(() => real() + 3_600_000); // an hour ahead: the lease is still held
      expect(await pool.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
      expect((await pool.peek("k")).retryAfterMs).toBeLessThanOrEqual(60_000);
      await a.release();
      expect((await pool.acquire("k")).acquired).toBe(true);
      now.mockImplementation(() => real() - 86_400_000); // a day behind: it still ends within its lease
      expect((await pool.peek("k")).retryAfterMs).toBeLessThanOrEqual(60_000);
    } finally {
      now.mockRestore();
    }
  });

  it("a sweep interval past what timers hold (2^31 - 1 ms) is capped: node would sweep every millisecond", async () => {
    const spy = vi.spyOn(globalThis, "setInterval");
    try {
      const store = new MemoryStore({ sweepIntervalMs: 30 * 86_400_000 }); // 30 days
      expect((await new ConcurrencyLimiter({ limit: 1, store }).acquire("k")).acquired).toBe(true);
      await new RateLimiter({ algorithm: "gcra", limit: 5, window: "1s", store }).consume("x"); // starts the timer
      const delays = spy.mock.calls.map((c) => c[1] ?? 0);
      expect(delays.length).toBe(1);
      for (const ms of delays) expect(ms).toBeLessThanOrEqual(2_147_483_647);
      store.close();
    } finally {
      spy.mockRestore();
    }
  });

  it("bounded: with maxKeys keys holding live leases, a new key is refused (overloaded), never a held key forgotten", async () => {
    const clock = { now: 1_000_000 };
    const store = new MemoryStore({ maxKeys: 4, sweepIntervalMs: 0 });
    const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 1000, store, clock: () => clock.now });
    for (const k of ["a", "b", "c", "d"]) expect((await pool.acquire(k)).acquired).toBe(true);
    expect(await pool.acquire("e")).toMatchObject({ acquired: false, reason: "overloaded" });
    expect((await pool.acquire("a")).acquired).toBe(false); // still held: not forgotten
    clock.now += 1000; // every lease expired: room again
    expect((await pool.acquire("e")).acquired).toBe(true);
  });

  it("bounded by maxBytes too: hostile distinct keys (or many leases) are refused (overloaded) before the budget is passed, never a held lease dropped", async () => {
    // A client of the service picks its keys (up to 512 characters) and holds each for leaseMs:
    // about 500 bytes a key, so maxKeys alone (1,000,000) let leases take 500 MB and more.
    const clock = { now: 1_000_000 };
    const store = new MemoryStore({ maxBytes: 16_384, sweepIntervalMs: 0 });
    const pool = new ConcurrencyLimiter({ limit: 1000, leaseMs: 1000, store, clock: () => clock.now });
    const held = [];
    for (let i = 0; i < 1000; i++) {
      const lease = await pool.acquire(`tenant:${i}:${"x".repeat(500)}`);
      if (!lease.acquired) {
        expect(lease).toMatchObject({ reason: "overloaded", retryAfterMs: 1000 });
        break;
      }
      held.push(lease);
    }
    expect(held.length).toBeGreaterThan(5); // about 16 KiB / (key + table + lease), 1 KiB a key
    expect(held.length).toBeLessThan(30);
    expect(await held[0]?.renew()).toBe(true); // held leases stay held and renewable
    let more = 0; // further leases on a key held: what bytes are left, a few at most
    while ((await pool.acquire(`tenant:0:${"x".repeat(500)}`)).acquired) more++;
    expect(more).toBeLessThan(5);
    // Many leases on one key count as well.
    await Promise.all(held.map((l) => l.release()));
    clock.now += 1000; // the extra leases on tenant:0 expire
    let onOne = 0;
    while ((await pool.acquire("one")).acquired) onOne++;
    expect(onOne).toBeGreaterThan(20);
    expect(onOne).toBeLessThan(100);
    clock.now += 1000; // every lease expired: room again
    expect((await pool.acquire(`tenant:new:${"x".repeat(500)}`)).acquired).toBe(true);
  });

  it("holds exactly the limit under many concurrent holders in one process", async () => {
    const pool = new ConcurrencyLimiter({ limit: 5, leaseMs: 60_000 });
    let held = 0;
    let most = 0;
    let done = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        for (let round = 0; round < 20; round++) {
          const lease = await pool.acquire("k");
          if (!lease.acquired) {
            await new Promise((r) => setImmediate(r));
            continue;
          }
          held++;
          most = Math.max(most, held);
          await new Promise((r) => setImmediate(r));
          held--;
          done++;
          await lease.release();
        }
      }),
    );
    expect(most).toBe(5);
    expect(done).toBeGreaterThan(0);
    expect(await pool.peek("k")).toEqual({ remaining: 5, retryAfterMs: 0, reason: undefined });
  });
});
