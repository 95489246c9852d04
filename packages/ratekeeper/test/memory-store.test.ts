/**
 * MemoryStore: bounded by maxKeys under a flood of one-off keys (hot keys keep their state),
 * expired keys dropped by sweep(), and a sweep timer that never keeps the process alive.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it, vi } from "vitest";
import { MemoryStore, RateLimiter } from "../src/index.js";

const SRC = fileURLToPath(new URL("../src/index.ts", import.meta.url));
const TSX = fileURLToPath(new URL("../../../node_modules/tsx/dist/esm/index.mjs", import.meta.url));

/** Runs an ESM snippet in a fresh node (TypeScript sources loaded through tsx); `RK` is the library. */
function runNode(code: string, flags: string[] = [], timeoutMs = 60_000) {
  const script = `const RK = await import(${JSON.stringify(SRC)});\n${code}`;
  return spawnSync(process.execPath, [...flags, "--import", TSX, "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: timeoutMs,
  });
}

describe("MemoryStore: bounded by maxKeys", () => {
  it("a flood of one-off keys never holds more than maxKeys, and a hot key keeps its state through it", async () => {
    let now = 1_700_000_000_000;
    const store = new MemoryStore({ maxKeys: 1_000, sweepIntervalMs: 0 });
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 5, window: "1h", store, clock: () => now });
    const other = new RateLimiter({ algorithm: "gcra", limit: 1, window: "1h", store, clock: () => now });
    for (let i = 0; i < 5; i++) expect((await limiter.consume("abuser")).allowed).toBe(true);
    expect((await other.consume("abuser")).allowed).toBe(true);
    let maxSize = 0;
    for (let i = 0; i < 30_000; i++) {
      now += 1;
      await (i % 2 === 0 ? limiter : other).consume(`one-off:${i}`);
      maxSize = Math.max(maxSize, store.size);
      if (i % 100 === 0) {
        // The abuser keeps knocking: still denied on both limiters, so their states survived.
        expect((await limiter.consume("abuser")).allowed, `fixed window forgot the abuser after ${i} one-off keys`).toBe(false);
        expect((await other.consume("abuser")).allowed, `gcra forgot the abuser after ${i} one-off keys`).toBe(false);
        maxSize = Math.max(maxSize, store.size);
      }
    }
    expect(maxSize).toBeLessThanOrEqual(1_000);
    expect(maxSize).toBeGreaterThanOrEqual(500); // it does use its room: at least half of it
  });

  it("the smallest store (maxKeys 2) stays within its bound", async () => {
    const store = new MemoryStore({ maxKeys: 2, sweepIntervalMs: 0 });
    const limiter = new RateLimiter({ algorithm: "sliding-log", limit: 2, window: "1m", store, clock: () => 0 });
    for (let i = 0; i < 50; i++) {
      await limiter.consume(`k${i % 7}`);
      expect(store.size).toBeLessThanOrEqual(2);
    }
    await limiter.reset("k0");
    await limiter.reset("k1");
    expect(store.size).toBeGreaterThanOrEqual(0);
  });

  it("reset forgets a key and frees its room", async () => {
    const store = new MemoryStore({ maxKeys: 10, sweepIntervalMs: 0 });
    const limiter = new RateLimiter({ algorithm: "token-bucket", limit: 1, window: "1m", store, clock: () => 0 });
    expect((await limiter.consume("a")).allowed).toBe(true);
    expect((await limiter.consume("a")).allowed).toBe(false);
    expect(store.size).toBe(1);
    await limiter.reset("a");
    expect(store.size).toBe(0);
    expect((await limiter.consume("a")).allowed).toBe(true);
  });

  it("heap stays bounded under 200,000 one-off keys (measured after gc in a child process)", () => {
    const r = runNode(
      `
      const store = new RK.MemoryStore({ maxKeys: 10_000, sweepIntervalMs: 0 });
      const limiter = new RK.RateLimiter({ algorithm: "sliding-window", limit: 10, window: "1m", buckets: 6, store, clock: () => 1_700_000_000_000 });
      const heap = () => { globalThis.gc(); globalThis.gc(); return process.memoryUsage().heapUsed; };
      let i = 0;
      const flood = async (n) => { for (const end = i + n; i < end; i++) await limiter.consume("ip:" + i); };
      await flood(20_000);
      const early = heap();
      await flood(180_000);
      const late = heap();
      console.log(JSON.stringify({ early, late, size: store.size }));
      `,
      ["--expose-gc"],
    );
    expect(r.status, r.stderr).toBe(0);
    const { early, late, size } = JSON.parse(r.stdout.trim().split("\n").pop() as string) as { early: number; late: number; size: number };
    expect(size).toBeLessThanOrEqual(10_000);
    // 180,000 more keys held unbounded would take tens of MB (a state with a 7-slot ring each);
    // bounded, the heap after them is about what it was after the first 20,000.
    expect(late - early).toBeLessThan(8 * 1024 * 1024);
  });
});

describe("MemoryStore: expiry", () => {
  it("sweep(nowMs) drops exactly the keys whose state has expired", async () => {
    let now = 0;
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const fixed = new RateLimiter({ algorithm: "fixed-window", limit: 3, window: 1_000, store, clock: () => now });
    const bucket = new RateLimiter({ algorithm: "token-bucket", limit: 1, window: 1_000, capacity: 4, store, clock: () => now });
    for (let i = 0; i < 100; i++) await fixed.consume(`f${i}`); // window [0, 1000): expires at 1000
    for (let i = 0; i < 50; i++) await bucket.consume(`b${i}`, 2); // 2 tokens at 1 per s: full again at 2000
    expect(store.size).toBe(150);
    expect(store.sweep(999)).toBe(0);
    expect(store.sweep(1_000)).toBe(100);
    expect(store.size).toBe(50);
    now = 1_500;
    await bucket.consume("b0"); // touched: 1.5 tokens used at 1500 -> full again at 3000
    expect(store.sweep(2_000)).toBe(49);
    expect(store.size).toBe(1);
    expect((await bucket.peek("b0", 3)).allowed).toBe(false); // the survivor kept its state
    expect(store.sweep(3_000)).toBe(1);
    expect(store.size).toBe(0);
  });

  it("the sweep timer, on the process clock, leaves alone the keys of a limiter with an injected clock", async () => {
    // A limiter given its own clock (a monotonic or corrected clock, a simulation's, a test's)
    // decides on that clock's times; the timer can only read Date.now(). Judged by Date.now(),
    // a key whose window is still running on the injected clock looked expired and was dropped:
    // the client got a fresh allowance early. Such keys are now left to the generations (maxKeys,
    // maxBytes) and to their next use; keys of limiters on the store's own clock are still swept.
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const behind = Date.now() - 86_400_000; // an injected clock a day behind the process's
      const store = new MemoryStore({ sweepIntervalMs: 1_000 });
      const injected = new RateLimiter({ algorithm: "fixed-window", limit: 1, window: "1h", store, clock: () => behind });
      const own = new RateLimiter({ algorithm: "fixed-window", limit: 1, window: 10, store });
      expect((await injected.consume("k")).allowed).toBe(true);
      expect((await own.consume("k")).allowed).toBe(true);
      await new Promise((r) => setTimeout(r, 20)); // the own-clock key's 10 ms window ends (real time)
      vi.advanceTimersByTime(1_000); // the sweep timer fires: Date.now() is a day past `behind`
      expect(store.size).toBe(1); // the own-clock key was swept; the injected one kept
      expect((await injected.consume("k")).allowed).toBe(false); // its window runs on its clock
    } finally {
      vi.useRealTimers();
    }
  });

  it("an expired key is treated as new even before a sweep", async () => {
    let now = 0;
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const limiter = new RateLimiter({ algorithm: "sliding-log", limit: 2, window: 1_000, store, clock: () => now });
    await limiter.consume("k");
    await limiter.consume("k");
    expect((await limiter.consume("k")).allowed).toBe(false);
    now = 1_000;
    expect((await limiter.peek("k")).remaining).toBe(1); // a peek reports what would remain after it
    expect((await limiter.consume("k", 2)).allowed).toBe(true);
  });

  it("starts its sweep timer with the first key, never at construction (Workers forbid timers in global scope)", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const store = new MemoryStore();
      const limiter = new RateLimiter({ algorithm: "gcra", limit: 5, window: "1s", store });
      expect(vi.getTimerCount()).toBe(0);
      await limiter.consume("k");
      expect(vi.getTimerCount()).toBe(1);
      await limiter.consume("other");
      expect(vi.getTimerCount()).toBe(1);
      store.close();
      expect(vi.getTimerCount()).toBe(0);
      await limiter.consume("after-close");
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it("the sweep timer does not keep the process alive", () => {
    // A store with its default timer (and one with a short one) and a limiter that has been used:
    // the process must end on its own once the script is done, long before the interval.
    const r = runNode(
      `
      const a = new RK.MemoryStore();
      const b = new RK.MemoryStore({ sweepIntervalMs: 3_600_000 });
      const limiter = new RK.RateLimiter({ algorithm: "gcra", limit: 5, window: "1s", store: b });
      await limiter.consume("k");
      console.log("done", a.size + b.size);
      `,
      [],
      30_000,
    );
    expect(r.error, "the process did not exit by itself").toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe("done 1");
  });
});
