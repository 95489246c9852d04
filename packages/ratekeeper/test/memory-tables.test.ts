/**
 * MemoryStore: the table a limiter binds (one per namespace and limits) is not kept for good.
 * A limiter made per request with a limit of its own (per-user plans, limits read from a
 * database) binds a new table each time; once its keys are gone (expired and swept, or turned
 * out) and no limiter holds it, the table goes too. While a limiter holds it, or while it holds
 * keys, it stays, and limiters bound alike share it (and its keys).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { MemoryStore, RateLimiter } from "../src/index.js";

const SRC = fileURLToPath(new URL("../src/index.ts", import.meta.url));
const TSX = fileURLToPath(new URL("../../../node_modules/tsx/dist/esm/index.mjs", import.meta.url));

/** Runs an ESM snippet in a fresh node with --expose-gc; `RK` is the library; returns its last line as JSON. */
function runNode<T = { before: number; after: number }>(code: string): T {
  const script = `const RK = await import(${JSON.stringify(SRC)});\n${code}`;
  const r = spawnSync(process.execPath, ["--expose-gc", "--import", TSX, "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 120_000,
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split("\n").pop() as string) as T;
}

/** Heap after full collections; a macrotask between them lets finalization callbacks run. */
const HEAP = `const heap = async () => {
  for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 10)); }
  return process.memoryUsage().heapUsed;
};`;

describe("MemoryStore: tables of limiters no one holds", () => {
  it("20,000 limiters made per request with distinct limits leave no tables once their keys expired", () => {
    const { before, after, size } = runNode<{ before: number; after: number; size: number }>(`
      ${HEAP}
      let now = 1_700_000_000_000;
      const store = new RK.MemoryStore({ sweepIntervalMs: 0 });
      const decide = (limit) =>
        new RK.RateLimiter({ algorithm: "fixed-window", limit, window: "1m", store, clock: () => now }).consume("user");
      for (let i = 1; i <= 2_000; i++) await decide(i); // warm-up: code, maps' own growth
      now += 3_600_000;
      store.sweep(now);
      const before = await heap();
      for (let i = 2_001; i <= 22_000; i++) await decide(i);
      now += 3_600_000;
      store.sweep(now); // every key expired and swept
      const after = await heap();
      console.log(JSON.stringify({ before, after, size: store.size }));
    `);
    expect(size).toBe(0);
    // Kept for good, each table took ~2.4-3.3 KB: 20,000 of them ~50-65 MB.
    expect(after - before, `heap grew ${((after - before) / 1e6).toFixed(1)} MB`).toBeLessThan(6 * 1024 * 1024);
  });

  it("tables whose keys a turn dropped go too (a store bounded by maxKeys, no sweep)", () => {
    const { before, after } = runNode(`
      ${HEAP}
      const store = new RK.MemoryStore({ maxKeys: 1_000, sweepIntervalMs: 0 });
      const decide = (limit) =>
        new RK.RateLimiter({ algorithm: "gcra", limit, window: "1h", store, clock: () => 1_700_000_000_000 }).consume("user");
      const hot = new RK.RateLimiter({ algorithm: "gcra", limit: 5, window: "1h", store, clock: () => 1_700_000_000_000 });
      for (let i = 1; i <= 2_000; i++) await decide(i);
      for (let i = 0; i < 2_000; i++) await hot.consume("k" + i); // turns the one-off tables' keys out
      const before = await heap();
      for (let i = 2_001; i <= 22_000; i++) await decide(i);
      for (let i = 0; i < 2_000; i++) await hot.consume("k" + i);
      const after = await heap();
      console.log(JSON.stringify({ before, after }));
    `);
    expect(after - before, `heap grew ${((after - before) / 1e6).toFixed(1)} MB`).toBeLessThan(6 * 1024 * 1024);
  });

  it("a table holding keys stays when its limiter goes: a limiter bound alike later finds its keys", () => {
    const { first, later } = runNode<{ first: number; later: number }>(`
      ${HEAP}
      const store = new RK.MemoryStore({ sweepIntervalMs: 0 });
      const make = () => new RK.RateLimiter({ algorithm: "token-bucket", limit: 3, window: "1h", store, clock: () => 1_700_000_000_000 });
      let a = make();
      for (let i = 0; i < 3; i++) await a.consume("k");
      const first = (await a.consume("k")).allowed ? 1 : 0;
      a = undefined;
      await heap();
      const later = (await make().consume("k")).allowed ? 1 : 0;
      console.log(JSON.stringify({ first, later }));
    `);
    expect(first).toBe(0);
    expect(later, "the key's state was lost with its first limiter").toBe(0);
  });

  it("a limiter keeps its table through a sweep that emptied it: state written after is shared with one bound alike", async () => {
    let now = 1_700_000_000_000;
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const opts = { algorithm: "sliding-window", limit: 2, window: "1m", store, clock: () => now } as const;
    const a = new RateLimiter(opts);
    await a.consume("k");
    now += 3_600_000;
    store.sweep(now);
    expect(store.size).toBe(0);
    expect((await a.consume("k")).allowed).toBe(true);
    expect((await a.consume("k")).allowed).toBe(true);
    expect(store.size).toBe(1);
    const b = new RateLimiter(opts);
    expect((await b.consume("k")).allowed, "a limiter bound alike did not see the state").toBe(false);
    // And the table, holding a key again, is swept and turned like any other.
    now += 3_600_000;
    expect(store.sweep(now)).toBe(1);
    expect(store.size).toBe(0);
  });

  it("pinned keys (the Redis store's degraded policy) keep a table that no limiter holds", () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const opts = { algorithm: "fixed-window", limit: 1, window: "1m", clock: () => 1_700_000_000_000 } as const;
    const limits = new RateLimiter({ ...opts, store }).limits;
    const t = store.bindTable(limits, "ns");
    t.pin("k");
    store.sweep(1_800_000_000_000); // the pinned key is held whatever the sweep
    expect(store.bindTable(limits, "ns")).toBe(t);
    expect(store.size).toBe(1);
  });
});
