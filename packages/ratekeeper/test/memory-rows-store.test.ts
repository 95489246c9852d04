/**
 * The memory store's row tables (memory-kinds.ts RowTable, TailRowTable, LogRowTable) against
 * the same tables with rings as objects (singleTable's `rows` false), for what
 * memory-rows.test.ts's properties do not reach:
 * - another limiter's table in the same store, whose new keys turn this table's generations
 *   between two decisions of one key (RowTable's last-key cache and its rows);
 * - stores of 60 and 200 keys, whose sweeps compact the key indexes (KeyIndex.compact: new slot
 *   tables and rows, the entries left where they were);
 * - costs up to the whole limit, refunds of more than the limit (the Redis store's degraded
 *   policy refunds the caller's cost into a table of its share), limits up to 2^53 - 1 for the
 *   sliding tail's rows, the sliding log's limits around its first ring (7 and 8);
 * - clocks that step back by hours and by 13 days (past a rebase and back).
 * And the store's byte count with `maxBytes` turns (a sliding log's ring that outgrows its row
 * turns the generations inside its decision): back to 0 once every key is swept.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MemoryStore, resolveLimits, type LimitSpec, type ResolvedLimit } from "../src/index.js";
import { singleTable } from "../src/stores/memory-kinds.js";

const opArb = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant("consume" as const), k: fc.nat(5), c: fc.nat(1000) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("peek" as const), k: fc.nat(5), c: fc.nat(1000) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("refund" as const), k: fc.nat(5), c: fc.nat(1000) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("reset" as const), k: fc.nat(5), c: fc.constant(0) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("pin" as const), k: fc.nat(5), c: fc.constant(0) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("unpin" as const), k: fc.nat(5), c: fc.constant(0) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("sweep" as const), k: fc.constant(0), c: fc.constant(0) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("flood" as const), k: fc.nat(40), c: fc.integer({ min: 1, max: 40 }) }) },
  // New keys of another limiter in the same store, then a key of this one again.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("other" as const), k: fc.nat(40), c: fc.integer({ min: 1, max: 8 }) }) },
);
type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

const stepArb = fc.oneof(
  { weight: 12, arbitrary: fc.nat(400) },
  { weight: 2, arbitrary: fc.integer({ min: -300, max: -1 }) },
  { weight: 1, arbitrary: fc.integer({ min: -40_000_000, max: -1 }) },
  { weight: 2, arbitrary: fc.nat(20_000) },
  { weight: 1, arbitrary: fc.constant(13 * 86_400_000) },
  { weight: 1, arbitrary: fc.constant(-13 * 86_400_000) },
);

const OTHER = resolveLimits([{ algorithm: "fixed-window", limit: 3, window: 1000 }]);

/** `ops` on the row table of `limits` and on the reference: every decision, the counts of keys, and bytes back to 0 at the end. */
function sameAsRings(limits: ResolvedLimit[], name: string, ops: [Op, number][], costOf: (c: number) => number, maxKeys: number): void {
  const rowStore = new MemoryStore({ maxKeys, sweepIntervalMs: 0 });
  const refStore = new MemoryStore({ maxKeys, sweepIntervalMs: 0 });
  const rows = rowStore.bindTable(limits, "w");
  const ref = singleTable(refStore, limits, false);
  const otherRows = rowStore.bindTable(OTHER, "o");
  const otherRef = refStore.bindTable(OTHER, "o");
  expect(rows.constructor.name).toBe(name);
  const lim = limits[0] as ResolvedLimit;
  let t = 1_764_236_401_237;
  const pins = new Map<string, number>();
  for (const [op, dt] of ops) {
    t = Math.max(1_700_000_000_000, t + dt);
    const key = `k${op.k}`;
    const c = costOf(op.c);
    switch (op.kind) {
      case "consume":
        expect(rows.consume(key, c, t)).toEqual(ref.consume(key, c, t));
        break;
      case "peek":
        expect(rows.peek(key, c, t)).toEqual(ref.peek(key, c, t));
        break;
      case "refund":
        rows.refund(key, c + lim.limit, t);
        ref.refund(key, c + lim.limit, t);
        break;
      case "reset":
        rows.reset(key);
        ref.reset(key);
        break;
      case "pin":
        rows.pin(key);
        ref.pin(key);
        pins.set(key, (pins.get(key) ?? 0) + 1);
        break;
      case "unpin":
        rows.unpin(key);
        ref.unpin(key);
        pins.set(key, Math.max(0, (pins.get(key) ?? 0) - 1));
        break;
      case "sweep":
        expect(rowStore.sweep(t)).toBe(refStore.sweep(t));
        break;
      case "flood":
        for (let i = 0; i < op.c; i++) expect(rows.consume(`f${op.k}.${i}`, 1, t)).toEqual(ref.consume(`f${op.k}.${i}`, 1, t));
        break;
      case "other":
        for (let i = 0; i < op.c; i++) expect(otherRows.consume(`o${op.k}.${i}`, 1, t)).toEqual(otherRef.consume(`o${op.k}.${i}`, 1, t));
        expect(rows.consume(key, c, t)).toEqual(ref.consume(key, c, t));
    }
    expect(rowStore.size).toBe(refStore.size);
    expect(rowStore.pinned).toBe(refStore.pinned);
  }
  for (let k = 0; k < 6; k++) expect(rows.peek(`k${k}`, 1, t)).toEqual(ref.peek(`k${k}`, 1, t));
  for (const [key, n] of pins) for (let i = 0; i < n; i++) rows.unpin(key);
  rowStore.sweep(t + 400 * 86_400_000);
  expect([rowStore.size, rowStore.bytes, rowStore.youngBytes, rowStore.pinned]).toEqual([0, 0, 0, 0]);
}

const opsArb = fc.array(fc.tuple(opArb, stepArb), { minLength: 20, maxLength: 200 });

describe("memory store: row tables in a shared store decide as with ring objects", () => {
  it("a sliding log's first ring in rows, limits 1-40, costs up to the limit", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 1, max: 40 }), fc.constantFrom(7, 8)),
        fc.constantFrom(1, 7, 50, 400, 3000, 86_400_000),
        fc.constantFrom(4, 12, 60, 200),
        opsArb,
        (limit, window, maxKeys, ops) => {
          const limits = resolveLimits([{ algorithm: "sliding-log", limit, window }]);
          sameAsRings(limits, "LogRowTable", ops, (c) => 1 + (c % limit), maxKeys);
        },
      ),
      { numRuns: 150 },
    );
  });

  it("one sub-window whose counts do not pack, limits up to 2^53 - 1, costs up to the limit", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 32_768, max: 32_780 }), fc.constantFrom(1e9, 2 ** 40, Number.MAX_SAFE_INTEGER)),
        fc.constantFrom(1, 2, 7, 50, 400, 3000, 86_400_000),
        fc.boolean(),
        fc.constantFrom(12, 60, 200),
        opsArb,
        (limit, window, weighted, maxKeys, ops) => {
          fc.pre(limit * window < 2 ** 53); // resolveLimits refuses the rest
          const limits = resolveLimits([{ algorithm: "sliding-window", buckets: 1, limit, window, weighted }]);
          const costOf = (c: number) => (c % 3 === 0 ? 1 : c % 3 === 1 ? Math.max(1, Math.floor((limit * c) / 1000)) : limit);
          sameAsRings(limits, "TailRowTable", ops, costOf, maxKeys);
        },
      ),
      { numRuns: 150 },
    );
  });

  it("several sub-windows", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 62 }),
        fc.integer({ min: 1, max: 40 }),
        fc.constantFrom(1, 7, 50, 400),
        fc.boolean(),
        fc.constantFrom(12, 60, 200),
        opsArb,
        (buckets, limit, sub, weighted, maxKeys, ops) => {
          const limits = resolveLimits([{ algorithm: "sliding-window", buckets, limit, window: buckets * sub, weighted }]);
          sameAsRings(limits, "RowTable", ops, (c) => 1 + (c % limit), maxKeys);
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("memory store: row tables under maxBytes", () => {
  it("turns by bytes (a ring outgrowing its row turns inside its decision): the count of bytes goes back to 0", () => {
    const specs: LimitSpec[] = [
      { algorithm: "sliding-log", limit: 40, window: 400 },
      { algorithm: "sliding-log", limit: 8, window: 400 },
      { algorithm: "sliding-log", limit: 7, window: 400 },
      { algorithm: "sliding-window", limit: 40_000, window: 400 },
      { algorithm: "sliding-window", limit: 40, window: 400, buckets: 5 },
    ];
    fc.assert(
      fc.property(fc.constantFrom(...specs), opsArb, (spec, ops) => {
        const store = new MemoryStore({ maxBytes: 4096, sweepIntervalMs: 0 });
        const limits = resolveLimits([spec]);
        const tab = store.bindTable(limits, "w");
        const other = store.bindTable(resolveLimits([{ algorithm: "sliding-log", limit: 40, window: 400 }]), "o");
        const limit = (limits[0] as ResolvedLimit).limit;
        let t = 1_764_236_401_237;
        const pins = new Map<string, number>();
        for (const [op, dt] of ops) {
          t = Math.max(1_700_000_000_000, t + dt);
          const key = `k${op.k}`;
          const c = 1 + (op.c % limit);
          if (op.kind === "consume") tab.consume(key, c, t);
          else if (op.kind === "peek") tab.peek(key, c, t);
          else if (op.kind === "refund") tab.refund(key, c, t);
          else if (op.kind === "reset") tab.reset(key);
          else if (op.kind === "pin") {
            tab.pin(key);
            pins.set(key, (pins.get(key) ?? 0) + 1);
          } else if (op.kind === "unpin") {
            tab.unpin(key);
            pins.set(key, Math.max(0, (pins.get(key) ?? 0) - 1));
          } else if (op.kind === "sweep") store.sweep(t);
          else if (op.kind === "flood") for (let i = 0; i < op.c; i++) tab.consume(`f${op.k}.${i}`, c, t);
          else {
            for (let i = 0; i < op.c; i++) other.consume(`o${op.k}.${i}`, 1 + ((op.c * 5) % 40), t);
            tab.consume(key, c, t);
          }
          expect(store.bytes).toBeGreaterThanOrEqual(0);
        }
        for (const [key, n] of pins) for (let i = 0; i < n; i++) tab.unpin(key);
        store.sweep(t + 400 * 86_400_000);
        expect([store.size, store.bytes, store.young, store.youngBytes]).toEqual([0, 0, 0, 0]);
      }),
      { numRuns: 300 },
    );
  });
});
