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

  it("a sweep that drops most keys gives their memory back to the process, not only to the estimate (child process, after gc)", () => {
    // A flood of distinct keys (an attacker, a crawler) grows the key index's slot table, its
    // dense arrays and its rows to the flood's size; once the flood's keys are swept the store
    // holds few keys but, before compaction, kept every array at the flood's size until two
    // turns of the generations, which a quiet store may never reach (found: 94 MB kept for 0
    // keys after 500,000 keys of a 10-sub-window sliding window).
    const specs = [
      { algorithm: "fixed-window", limit: 100, window: "1m" },
      { algorithm: "sliding-window", limit: 100, window: "1m", buckets: 10 },
      { algorithm: "sliding-log", limit: 100, window: "1m" },
      { algorithm: "sliding-window", limit: 100_000, window: "1m" },
    ];
    const script = `
      const RK = await import(${JSON.stringify(SRC)});
      let now = 1_700_000_040_000; // on a minute: the fixed window's windows start there
      const opts = { maxKeys: 10_000_000, maxBytes: 2 ** 40, sweepIntervalMs: 0 };
      const store = new RK.MemoryStore(opts);
      const ref = new RK.MemoryStore(opts); // the same traffic without the flood
      const make = (s) => ${JSON.stringify(specs)}.map((spec) => new RK.RateLimiter({ ...spec, store: s, clock: () => now }));
      const limiters = make(store);
      const refs = make(ref);
      const used = () => { globalThis.gc(); globalThis.gc(); const m = process.memoryUsage(); return m.heapUsed + m.external; };
      for (const l of limiters) l.consumeNow("warm-up", 1);
      const before = used();
      for (let i = 0; i < 60_000; i++) for (const l of limiters) l.consumeNow("flood:" + i, 1);
      const flood = used() - before;
      now += 125_000; // the flood's keys expire (two windows at most); these stay
      for (const ls of [limiters, refs]) for (const l of ls) for (let i = 0; i < 50; i++) l.consumeNow("kept:" + i, 1 + (i % 9));
      now += 5_000;
      store.sweep(now);
      ref.sweep(now);
      const kept = store.size;
      const left = used() - before;
      // The kept keys' states survive the compaction: the same decisions as without the flood.
      for (let j = 0; j < limiters.length; j++) for (let i = 0; i < 50; i++) {
        const a = JSON.stringify(limiters[j].consumeNow("kept:" + i, 1 + (i % 13)));
        const b = JSON.stringify(refs[j].consumeNow("kept:" + i, 1 + (i % 13)));
        if (a !== b) throw new Error("kept:" + i + " of limiter " + j + ": " + a + " != " + b);
      }
      console.log(JSON.stringify({ flood, left, kept }));
    `;
    const r = spawnSync(process.execPath, ["--expose-gc", "--import", TSX, "--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const { flood, left, kept } = JSON.parse(r.stdout.trim().split("\n").pop() as string) as { flood: number; left: number; kept: number };
    expect(kept).toBe(4 * 50);
    expect(flood).toBeGreaterThan(20e6);
    expect(left / flood, `${(left / 1e6).toFixed(1)} MB of the flood's ${(flood / 1e6).toFixed(1)} MB kept after the sweep`).toBeLessThan(
      0.05,
    );
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
