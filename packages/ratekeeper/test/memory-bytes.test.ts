/**
 * MemoryStore bounded in bytes: the sliding log's ring grows with its use, the store counts
 * every key's estimated bytes (key string, entry, state, ring), keeps them within `maxBytes`,
 * gives them back on reset, sweep and turn, and the estimate is close to what V8 really uses.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { MemoryStore, RateLimiter, RateLimitConfigError, type LimitSpec } from "../src/index.js";

const SRC = fileURLToPath(new URL("../src/index.ts", import.meta.url));
const TSX = fileURLToPath(new URL("../../../node_modules/tsx/dist/esm/index.mjs", import.meta.url));

describe("MemoryStore: maxBytes", () => {
  it("a sliding-log key that logged a few units holds a small ring, not `limit` slots", async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const limiter = new RateLimiter({ algorithm: "sliding-log", limit: 100_000, window: "1h", store, clock: () => 0 });
    await limiter.consume("one-off");
    // 100,000 slots up front would be 800 KB; a grown-on-demand ring is a few hundred bytes.
    expect(store.bytes).toBeLessThan(1_000);
    await limiter.consume("one-off", 5_000);
    expect(store.bytes).toBeGreaterThan(8 * 5_000);
    expect(store.bytes).toBeLessThan(8 * 10_002 + 1_000);
  });

  it("a flood of keys that each log many units stays within maxBytes; a key in use keeps its state", async () => {
    let now = 1_700_000_000_000;
    const maxBytes = 1024 * 1024;
    const store = new MemoryStore({ maxBytes, sweepIntervalMs: 0 });
    const log = new RateLimiter({ algorithm: "sliding-log", limit: 1000, window: "1h", store, clock: () => now });
    const two: LimitSpec[] = [
      { algorithm: "sliding-log", limit: 500, window: "1h" },
      { algorithm: "token-bucket", limit: 1000, window: "1s" },
    ];
    const multi = new RateLimiter({ limits: two, store, clock: () => now });
    expect((await log.consume("abuser", 1000)).allowed).toBe(true);
    let peak = 0;
    for (let i = 0; i < 3_000; i++) {
      now++;
      // Each key's ring grows to hold 300 units (2.4 KB): 3,000 of them would be over 7 MB.
      await (i % 3 === 0 ? multi : log).consume(`k${i}`, 300);
      peak = Math.max(peak, store.bytes);
      if (i % 50 === 0) expect((await log.consume("abuser")).allowed, `forgot the abuser after ${i} keys`).toBe(false);
    }
    // One ring's growth (at most 8 * limit bytes) may land before the turn it triggers.
    expect(peak).toBeLessThanOrEqual(maxBytes + 8 * 1000 + 400);
    expect(peak).toBeGreaterThanOrEqual(maxBytes / 2); // it uses its room
    expect(store.size).toBeLessThan(1_000);
  });

  it("bytes go back to zero when every key is reset or swept (the accounting balances)", async () => {
    let now = 0;
    const store = new MemoryStore({ maxBytes: 64 * 1024, sweepIntervalMs: 0 });
    const limiters = [
      new RateLimiter({ algorithm: "sliding-log", limit: 64, window: 1_000, store, clock: () => now }),
      new RateLimiter({ algorithm: "sliding-window", limit: 64, window: 1_000, buckets: 4, store, clock: () => now }),
      new RateLimiter({ algorithm: "fixed-window", limit: 64, window: 1_000, store, clock: () => now }),
      new RateLimiter({
        limits: [
          { algorithm: "sliding-log", limit: 64, window: 1_000 },
          { algorithm: "token-bucket", limit: 64, window: 1_000 },
        ],
        store,
        clock: () => now,
      }),
    ];
    // Enough keys and growth for several turns; keys with wide characters too.
    for (let i = 0; i < 600; i++) {
      const l = limiters[i % limiters.length] as RateLimiter;
      await l.consume(i % 7 === 0 ? `ключ-${i}` : `key-${i}`, 1 + (i % 40));
      if (i % 5 === 0) await l.consume(`key-${i}`, 10);
    }
    expect(store.bytes).toBeGreaterThan(0);
    expect(store.bytes).toBeLessThanOrEqual(64 * 1024 + 8 * 64 + 400);
    for (let i = 0; i < 300; i++) await (limiters[i % limiters.length] as RateLimiter).reset(i % 7 === 0 ? `ключ-${i}` : `key-${i}`);
    now = 10_000;
    store.sweep(now);
    expect(store.size).toBe(0);
    expect(store.bytes).toBe(0);
    expect(store.youngBytes).toBe(0);
  });

  it("refuses a maxBytes that is not a whole number of at least 4096 bytes, naming it", () => {
    for (const bad of [0, 100, -1, 1.5, Number.NaN, "1mb" as unknown as number]) {
      expect(() => new MemoryStore({ maxBytes: bad })).toThrow(RateLimitConfigError);
      expect(() => new MemoryStore({ maxBytes: bad })).toThrow(/maxBytes/);
    }
    expect(new MemoryStore({ sweepIntervalMs: 0 }).maxBytes).toBe(256 * 1024 * 1024);
  });

  it("the estimate per key is close to what V8 really uses (measured after gc in a child process)", () => {
    const cases: [string, object, number][] = [
      ["fixed-window", { algorithm: "fixed-window", limit: 1000, window: "1h" }, 1],
      ["sliding-log", { algorithm: "sliding-log", limit: 1000, window: "1h" }, 100],
      ["sliding-window", { algorithm: "sliding-window", limit: 1000, window: "1h", buckets: 10 }, 1],
    ];
    for (const [name, spec, charges] of cases) {
      const script = `
        const RK = await import(${JSON.stringify(SRC)});
        let now = 1_700_000_000_000;
        const store = new RK.MemoryStore({ maxKeys: 10_000_000, maxBytes: 2 ** 40, sweepIntervalMs: 0 });
        const limiter = new RK.RateLimiter({ ...${JSON.stringify(spec)}, store, clock: () => now });
        const used = () => { globalThis.gc(); globalThis.gc(); const m = process.memoryUsage(); return m.heapUsed + m.external; };
        limiter.consumeNow("warm-up", 1);
        const before = used();
        const n = 20_000;
        for (let i = 0; i < n; i++) { const k = "ip:10.0." + (i >> 8) + "." + (i & 255); for (let c = 0; c < ${charges}; c++) limiter.consumeNow(k, 1); now++; }
        console.log(JSON.stringify({ measured: (used() - before) / n, estimated: store.bytes / store.size }));
      `;
      const r = spawnSync(process.execPath, ["--expose-gc", "--import", TSX, "--input-type=module", "-e", script], {
        encoding: "utf8",
        timeout: 60_000,
      });
      expect(r.status, r.stderr).toBe(0);
      const { measured, estimated } = JSON.parse(r.stdout.trim().split("\n").pop() as string) as { measured: number; estimated: number };
      expect(
        estimated / measured,
        `${name}: estimated ${estimated.toFixed(0)} bytes a key, measured ${measured.toFixed(0)}`,
      ).toBeGreaterThan(0.85);
      // The measurement itself moves from process to process (the fixed window: 134-164 bytes a
      // key over 12 runs, heap + external after gc; what V8 compiled or left between the two
      // readings), so the estimate's 173 is 1.06-1.31x of it: the bound allows for that. An
      // estimate above the truth only makes maxBytes evict a little early; below it is the danger.
      expect(estimated / measured, `${name}: estimated ${estimated.toFixed(0)} bytes a key, measured ${measured.toFixed(0)}`).toBeLessThan(
        1.4,
      );
    }
  });
});
