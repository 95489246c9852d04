/**
 * A sweep's compaction (KeyIndex.compact, 29d0f85) and the pinned keys' (3d735c7) make the slot
 * table, the dense arrays and the rows again; a row table (sliding window of several sub-windows,
 * sliding log) must still find each key's counts in its row afterwards, and the pins theirs.
 * memory-rows.test.ts checks rows against rings as objects in a store of 12 keys, where no index
 * ever grows past the 16 slots below which none compacts; here the same reference, with floods of
 * up to 200 keys swept away, many keys pinned and then released (so the pins' index grows and
 * compacts too), and a check that compactions did run.
 */
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { MemoryStore, resolveLimits, type ResolvedLimit } from "../src/index.js";
import { KeyIndex } from "../src/stores/key-index.js";
import { singleTable } from "../src/stores/memory-kinds.js";
import type { Table } from "../src/stores/memory-table.js";

/** Compactions that gave back slots, and rows, over the whole file (see the last test). */
const ran = { slots: 0, rows: 0 };
const { compact } = Object.getOwnPropertyDescriptors(KeyIndex.prototype);
const compactOf = compact?.value as (this: KeyIndex<unknown>) => void;
KeyIndex.prototype.compact = function (this: KeyIndex<unknown>): void {
  const slots = this.tableBytes;
  const rows = this.rows.length;
  compactOf.call(this);
  if (this.tableBytes < slots) ran.slots++;
  if (this.rows.length < rows) ran.rows++;
};
afterAll(() => {
  KeyIndex.prototype.compact = compactOf;
});

const K = 60; // named keys: enough pinned at once for the pins' index to grow past 16 slots
const run = (n: number) => fc.integer({ min: 1, max: n });
const opArb = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant("consume" as const), k: fc.nat(K - 1), c: run(4) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("peek" as const), k: fc.nat(K - 1), c: run(4) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("refund" as const), k: fc.nat(K - 1), c: run(4) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("reset" as const), k: fc.nat(K - 1), c: fc.constant(0) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("pin" as const), k: fc.nat(K - 1), c: run(K) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("unpin" as const), k: fc.nat(K - 1), c: run(K) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("sweep" as const), k: fc.constant(0), c: fc.constant(0) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("flood" as const), k: fc.nat(40), c: run(200) }) },
);
type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

const stepArb = fc.oneof(
  { weight: 12, arbitrary: fc.nat(400) },
  { weight: 2, arbitrary: fc.integer({ min: -300, max: -1 }) }, // a clock that steps back
  { weight: 4, arbitrary: fc.nat(20_000) }, // past the window: the next sweep drops the floods
  { weight: 1, arbitrary: fc.constant(13 * 86_400_000) }, // past the rebase (which sweeps)
);

/** `ops` on a row table and on the reference (rings as objects): every decision and count the same. */
function sameAsRings(limits: ResolvedLimit[], ops: [Op, number][], costOf: (c: number) => number): void {
  const rowStore = new MemoryStore({ maxKeys: 400, sweepIntervalMs: 0 });
  const refStore = new MemoryStore({ maxKeys: 400, sweepIntervalMs: 0 });
  const rows = rowStore.bind(limits, "w") as unknown as Table<{ exp: number }>;
  const ref = singleTable(refStore, limits, false);
  const both = (key: string, t: number): void => expect(rows.consume(key, 1, t)).toEqual(ref.consume(key, 1, t));
  let t = 1_764_236_401_237;
  for (const [op, dt] of ops) {
    t = Math.max(1_764_000_000_000, t + dt);
    const key = `k${op.k}`;
    switch (op.kind) {
      case "consume":
        expect(rows.consume(key, costOf(op.c), t)).toEqual(ref.consume(key, costOf(op.c), t));
        break;
      case "peek":
        expect(rows.peek(key, costOf(op.c), t)).toEqual(ref.peek(key, costOf(op.c), t));
        break;
      case "refund":
        rows.refund(key, costOf(op.c), t);
        ref.refund(key, costOf(op.c), t);
        break;
      case "reset":
        rows.reset(key);
        ref.reset(key);
        break;
      case "pin":
      case "unpin":
        // A run of named keys, each pinned (or released) and then decided: its row read where it is now.
        for (let i = 0; i < op.c; i++) {
          const k = `k${(op.k + i) % K}`;
          rows[op.kind](k);
          ref[op.kind](k);
          both(k, t);
        }
        break;
      case "sweep":
        expect(rowStore.sweep(t)).toBe(refStore.sweep(t));
        break;
      case "flood":
        for (let i = 0; i < op.c; i++) both(`f${op.k}.${i}`, t);
    }
    expect(rowStore.size).toBe(refStore.size);
    expect(rowStore.pinned).toBe(refStore.pinned);
  }
  for (let k = 0; k < K; k++) expect(rows.peek(`k${k}`, 1, t)).toEqual(ref.peek(`k${k}`, 1, t));
}

describe("memory store: rows through compactions of the generations' and the pins' indexes", () => {
  it("a sliding window of several sub-windows decides as with ring objects", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 62 }),
        fc.integer({ min: 1, max: 12 }),
        fc.constantFrom(7, 50, 400, 3000), // the sub-window's length, ms
        fc.boolean(),
        fc.array(fc.tuple(opArb, stepArb), { minLength: 20, maxLength: 120 }),
        (buckets, limit, sub, weighted, ops) => {
          const limits = resolveLimits([{ algorithm: "sliding-window", buckets, limit, window: buckets * sub, weighted }]);
          // Costs up to the limit: a larger one is refused before any row is read (store-cost-over-capacity.test.ts).
          sameAsRings(limits, ops, (c) => Math.min(limit, c));
        },
      ),
      { numRuns: 120 },
    );
  }, 60_000);

  it("a sliding log (first ring in a row, a grown one its own) decides as with ring objects", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.constantFrom(7, 50, 400, 3000), // the window, ms
        fc.array(fc.tuple(opArb, stepArb), { minLength: 20, maxLength: 120 }),
        (limit, window, ops) => {
          const limits = resolveLimits([{ algorithm: "sliding-log", limit, window }]);
          sameAsRings(limits, ops, (c) => Math.min(limit, c === 4 ? 9 : c));
        },
      ),
      { numRuns: 120 },
    );
  }, 60_000);

  it("compactions ran, of slots and of rows (else the tests above would check nothing new)", () => {
    expect(ran.slots).toBeGreaterThan(50);
    expect(ran.rows).toBeGreaterThan(50);
  });
});
