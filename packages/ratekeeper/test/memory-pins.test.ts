/**
 * The memory store's pinned keys (stores/memory-pins.ts), which the Redis store's degraded policy
 * uses for the keys of its ledger: a pinned key survives any number of turns; released by its
 * last holder it is bounded like any key again; the store's counts of keys and bytes balance
 * (rings that grow while pinned, resets of pinned keys, several holders); and a rebase of the
 * table's time keeps a pinned key's decisions those of the Evaluator on absolute time.
 */
import { describe, expect, it } from "vitest";
import { Evaluator } from "../src/core/evaluate.js";
import { MemoryStore, resolveLimits, type LimitSpec, type LimitState } from "../src/index.js";
import { REBASE_AT } from "../src/stores/memory-rebase.js";

const T0 = 1_700_000_000_000;
const DAY = 86_400_000;

describe("memory store: pinned keys", () => {
  it("a pinned key keeps its state through turns; released, it is dropped like any other", () => {
    const store = new MemoryStore({ maxKeys: 100, sweepIntervalMs: 0 });
    const t = store.bindTable(resolveLimits([{ algorithm: "fixed-window", limit: 3, window: "1h" }]), "p");
    for (let i = 0; i < 3; i++) t.consume("k", 1, T0);
    t.pin("k");
    t.pin("k"); // two holders
    for (let i = 0; i < 1_000; i++) t.consume(`other${i}`, 1, T0);
    expect(t.consume("k", 1, T0).allowed).toBe(false);
    expect(store.size).toBeLessThanOrEqual(store.maxKeys + store.pinned);
    t.unpin("k");
    expect(store.pinned).toBe(1);
    for (let i = 0; i < 1_000; i++) t.consume(`more${i}`, 1, T0);
    expect(t.consume("k", 1, T0).allowed).toBe(false);
    t.unpin("k");
    t.unpin("k"); // one more than held: nothing
    expect(store.pinned).toBe(0);
    for (let i = 0; i < 1_000; i++) t.consume(`again${i}`, 1, T0);
    expect(t.consume("k", 1, T0).allowed).toBe(true); // dropped: fresh
    expect(store.size).toBeLessThanOrEqual(store.maxKeys);
  });

  it("the pinned keys' index gives back its room once most of its keys are released (an outage's ledger emptied)", () => {
    // The degraded policy pins up to 100,000 keys per limiter during an outage; once Redis took
    // their units they are released one by one. Their index (slot table, arrays, rows) kept the
    // outage's size as long as one key stayed pinned.
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const spec: LimitSpec = { algorithm: "sliding-window", limit: 5, window: "1h", buckets: 10 };
    const t = store.bindTable(resolveLimits([spec]), "p");
    const index = () => (t as unknown as { pinIndex(): { tableBytes: number; rows: Float64Array } | undefined }).pinIndex();
    for (let i = 0; i < 20_000; i++) {
      t.consume(`k${i}`, 1 + (i % 3), T0);
      t.pin(`k${i}`);
    }
    const peak = index();
    expect(peak?.tableBytes).toBeGreaterThanOrEqual(4 * 32_768);
    for (let i = 10; i < 20_000; i++) t.unpin(`k${i}`);
    expect(store.pinned).toBe(10);
    expect(index()?.tableBytes).toBeLessThanOrEqual(4 * 64);
    expect(index()?.rows.length).toBeLessThanOrEqual(2 * 15 * 12);
    // The keys still pinned keep their counts (rows included) through the compaction.
    for (let i = 0; i < 10; i++) {
      const d = t.consume(`k${i}`, 5 - (1 + (i % 3)), T0);
      expect(d.allowed).toBe(true);
      expect(t.consume(`k${i}`, 1, T0).allowed).toBe(false);
    }
  });

  it("a reset forgets a pinned key's state; the key stays pinned for its holders", () => {
    const store = new MemoryStore({ maxKeys: 100, sweepIntervalMs: 0 });
    const t = store.bindTable(resolveLimits([{ algorithm: "fixed-window", limit: 3, window: "1h" }]), "p");
    for (let i = 0; i < 3; i++) t.consume("k", 1, T0);
    t.pin("k");
    t.reset("k");
    expect(store.pinned).toBe(1);
    expect(t.peek("k", 3, T0).allowed).toBe(true);
    t.consume("k", 3, T0);
    for (let i = 0; i < 1_000; i++) t.consume(`other${i}`, 1, T0);
    expect(t.consume("k", 1, T0).allowed).toBe(false);
  });

  it("the counts of keys and bytes balance: rings grown while pinned, resets of pinned keys, turns", () => {
    let now = T0;
    const store = new MemoryStore({ maxBytes: 16 * 1024, sweepIntervalMs: 0 });
    const specs: LimitSpec[][] = [
      [{ algorithm: "sliding-log", limit: 64, window: 1_000 }],
      [
        { algorithm: "sliding-log", limit: 64, window: 1_000 },
        { algorithm: "token-bucket", limit: 64, window: 1_000 },
      ],
    ];
    const tables = specs.map((s, i) => store.bindTable(resolveLimits(s), `t${i}`, { injectedClock: true }));
    for (let i = 0; i < 400; i++) {
      const t = tables[i % 2]!;
      const key = `key-${i % 50}`;
      t.consume(key, 1 + (i % 5), now);
      if (i % 3 === 0) t.pin(key);
      if (i % 7 === 0) t.reset(key);
      if (i % 11 === 0) t.unpin(key);
      if (i % 13 === 0) t.pin(`key-${50 + (i % 10)}`); // a key with no entry: pinned fresh
      t.consume(key, 8, now); // grows the ring, pinned or not
      now += 3;
    }
    expect(store.pinned).toBeGreaterThan(0);
    // Release every pin (more calls than holders do nothing), then reset or sweep every key.
    for (const t of tables) for (let k = 0; k < 60; k++) for (let i = 0; i < 400; i++) t.unpin(`key-${k}`);
    expect(store.pinned).toBe(0);
    for (let k = 0; k < 60; k += 2) for (const t of tables) t.reset(`key-${k}`);
    store.sweep(now + 10_000);
    expect([store.size, store.bytes, store.youngBytes]).toEqual([0, 0, 0]);
  });

  it("a rebase keeps a pinned key's decisions those of the Evaluator on absolute time, expired or live", () => {
    // A window of 30 days (first-request: live across a rebase) and one of a second (long expired at it).
    for (const spec of [
      { algorithm: "fixed-window", limit: 10, window: 30 * DAY, align: "first-request" },
      { algorithm: "sliding-window", limit: 10, window: 1_000, buckets: 4 },
    ] as LimitSpec[]) {
      const limits = resolveLimits([spec]);
      const t = new MemoryStore({ sweepIntervalMs: 0 }).bindTable(limits, "r", { injectedClock: true });
      const inner = t as unknown as { base: number };
      const ev = new Evaluator(limits);
      let ref: { st: LimitState[]; exp: number } = { st: ev.init(), exp: Number.NEGATIVE_INFINITY };
      const consume = (now: number, cost: number) => {
        if (now >= ref.exp) ref = { st: ev.init(), exp: Number.NEGATIVE_INFINITY };
        const want = ev.run(ref.st, now, cost, true);
        if (want.allowed) ref.exp = now + ev.ttlMs;
        expect(t.consume("k", cost, now), `${spec.algorithm} at ${now - T0}`).toEqual(want);
      };
      consume(T0, 5);
      t.pin("k"); // the only key: the table must not start its time afresh at the next reading
      const bases = new Set<number>();
      let now = T0;
      for (let i = 0; i < 6; i++) {
        now += REBASE_AT + DAY; // past the rebase threshold each time
        bases.add(inner.base);
        consume(now, 1);
        consume(now + 1, 2);
      }
      bases.add(inner.base);
      expect(bases.size).toBeGreaterThan(4); // it rebased
      t.unpin("k");
    }
  });

  it("a pinned key left alone through many rebases keeps small integers (a fresh state once expired)", () => {
    const limits = resolveLimits([{ algorithm: "sliding-window", limit: 10, window: 1_000, buckets: 4 }]);
    const t = new MemoryStore({ sweepIntervalMs: 0 }).bindTable(limits, "r", { injectedClock: true });
    t.consume("idle", 4, T0);
    t.pin("idle");
    let now = T0;
    for (let i = 0; i < 8; i++) t.consume("tick", 1, (now += REBASE_AT + DAY));
    const pins = (t as unknown as { pins: { entries: { get(k: string): { exp: number; a: number } } } }).pins;
    const idle = pins.entries.get("idle");
    // Shifted back with every rebase, its times were below -2^31 by the third (heap numbers).
    expect(idle.exp).toBe(0);
    expect(Math.abs(idle.a)).toBeLessThan(2 ** 30);
    expect(t.consume("idle", 10, now).allowed).toBe(true);
  });
});
