/**
 * A sliding window of several sub-windows keeps its keys' ring counts in rows of its key
 * indexes (stores/memory-rows.ts), moved with each key between the generations and the pins
 * (memory-table.ts) and with each entry a delete moves (key-index.ts). The reference: the same
 * table with the rings as objects (singleTable's `rows` false, the layout before), in a store of
 * its own with the same bounds. Both see the same operations on a few keys and a flood of others
 * (so the generations turn, and keys move from the old one to the young one): consumes, peeks,
 * refunds, resets, pins and unpins, sweeps, clock steps back and a jump past the rebase (12
 * days); every decision, and the stores' counts of keys, must be the same.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MemoryStore, resolveLimits, type ResolvedLimit } from "../src/index.js";
import { singleTable } from "../src/stores/memory-kinds.js";
import type { Table } from "../src/stores/memory-table.js";

const opArb = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant("consume" as const), k: fc.nat(5), c: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("peek" as const), k: fc.nat(5), c: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("refund" as const), k: fc.nat(5), c: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("reset" as const), k: fc.nat(5), c: fc.constant(0) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("pin" as const), k: fc.nat(5), c: fc.constant(0) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("unpin" as const), k: fc.nat(5), c: fc.constant(0) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("sweep" as const), k: fc.constant(0), c: fc.constant(0) }) },
  // New keys, one unit each: the young generations fill and turn (maxKeys 12).
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("flood" as const), k: fc.nat(40), c: fc.integer({ min: 1, max: 8 }) }) },
);

type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

const stepArb = fc.oneof(
  { weight: 12, arbitrary: fc.nat(400) },
  { weight: 2, arbitrary: fc.integer({ min: -300, max: -1 }) }, // a clock that steps back
  { weight: 2, arbitrary: fc.nat(20_000) },
  { weight: 1, arbitrary: fc.constant(13 * 86_400_000) }, // past the rebase of the table's time
);

/** Runs `ops` on a row table and on the reference (rings as objects) of `limits`: every decision and count must match. */
function sameAsRings(limits: ResolvedLimit[], names: [string, string], ops: [Op, number][], costOf: (c: number) => number): void {
  const rowStore = new MemoryStore({ maxKeys: 12, sweepIntervalMs: 0 });
  const refStore = new MemoryStore({ maxKeys: 12, sweepIntervalMs: 0 });
  const rows = rowStore.bind(limits, "w") as unknown as Table<{ exp: number }>;
  const ref = singleTable(refStore, limits, false);
  expect(rows.constructor.name).toBe(names[0]);
  expect(ref.constructor.name).toBe(names[1]);
  let t = 1_764_236_401_237;
  for (const [op, dt] of ops) {
    t = Math.max(1_764_000_000_000, t + dt);
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
        rows.refund(key, c, t);
        ref.refund(key, c, t);
        break;
      case "reset":
        rows.reset(key);
        ref.reset(key);
        break;
      case "pin":
        rows.pin(key);
        ref.pin(key);
        break;
      case "unpin":
        rows.unpin(key);
        ref.unpin(key);
        break;
      case "sweep":
        expect(rowStore.sweep(t)).toBe(refStore.sweep(t));
        break;
      case "flood":
        for (let i = 0; i < op.c; i++) expect(rows.consume(`f${op.k}.${i}`, 1, t)).toEqual(ref.consume(`f${op.k}.${i}`, 1, t));
    }
    expect(rowStore.size).toBe(refStore.size);
    expect(rowStore.pinned).toBe(refStore.pinned);
  }
  // Every key the ops named reads the same afterwards.
  for (let k = 0; k < 6; k++) expect(rows.peek(`k${k}`, 1, t)).toEqual(ref.peek(`k${k}`, 1, t));
}

describe("memory store: a sliding window's counts in rows decide as with ring objects", () => {
  it("through turns, adoption from the old generation, pins, resets, sweeps, peeks, refunds and rebases", () => {
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
          sameAsRings(limits, ["RowTable", "RingTable"], ops, (c) => Math.min(limit, c));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("a sliding log's first ring in rows, a grown one its own: through the same operations", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.constantFrom(7, 50, 400, 3000), // the window, ms
        fc.array(fc.tuple(opArb, stepArb), { minLength: 20, maxLength: 160 }),
        (limit, window, ops) => {
          const limits = resolveLimits([{ algorithm: "sliding-log", limit, window }]);
          // Costs of one unit (denials remembered) and more (rings that grow past the row).
          sameAsRings(limits, ["LogRowTable", "LogTable"], ops, (c) => Math.min(limit, c === 4 ? 9 : c));
        },
      ),
      { numRuns: 400 },
    );
  });

  it("one sub-window whose counts do not pack (limit above 32,767): its two counts in rows", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 32_768, max: 32_780 }),
        fc.constantFrom(7, 50, 400, 3000),
        fc.boolean(),
        fc.array(fc.tuple(opArb, stepArb), { minLength: 20, maxLength: 120 }),
        (limit, window, weighted, ops) => {
          const limits = resolveLimits([{ algorithm: "sliding-window", buckets: 1, limit, window, weighted }]);
          // Costs of one unit (denials remembered) and of up to the whole limit (denials at all).
          sameAsRings(limits, ["TailRowTable", "TailTable"], ops, (c) => (c === 1 ? 1 : Math.min(limit, c * 8_192)));
        },
      ),
      { numRuns: 300 },
    );
  });
});

const LIB = pathToFileURL(fileURLToPath(new URL("../dist/index.js", import.meta.url))).href;

describe("memory store: a row table's decisions hold small integers", () => {
  it("remaining is a small integer, not a box (the built library, --allow-natives-syntax)", () => {
    // Before decideRow is optimized, a count read from a Float64Array is a heap number; stored
    // once in a decision's remaining, it made V8 box that field in every decision (memory-rows.ts).
    const script = `import { RateLimiter, MemoryStore } from ${JSON.stringify(LIB)};
const lim = new RateLimiter({ limits: [{ algorithm: "sliding-window", limit: 1e9, window: "1h", buckets: 10 }], store: new MemoryStore() });
const seen = { allowed: true, denied: true };
for (let i = 0; i < 50_000; i++) seen.allowed &&= %IsSmi(lim.consumeNow("k" + (i % 100)).remaining);
const one = new RateLimiter({ limits: [{ algorithm: "sliding-window", limit: 1, window: "1h", buckets: 10 }], store: new MemoryStore() });
for (let i = 0; i < 50_000; i++) { const d = one.consumeNow("k" + (i % 100)); if (!d.allowed) seen.denied &&= %IsSmi(d.remaining); }
// One sub-window of a limit too large to pack: its counts in rows of two (TailRowTable).
const tail = new RateLimiter({ limits: [{ algorithm: "sliding-window", limit: 1e9, window: "1h" }], store: new MemoryStore() });
for (let i = 0; i < 50_000; i++) seen.allowed &&= %IsSmi(tail.consumeNow("k" + (i % 100)).remaining);
const full = new RateLimiter({ limits: [{ algorithm: "sliding-window", limit: 40_000, window: "1h" }], store: new MemoryStore() });
for (let k = 0; k < 100; k++) full.consumeNow("k" + k, 39_999);
for (let i = 0; i < 50_000; i++) { const d = full.consumeNow("k" + (i % 100), 2); if (!d.allowed) seen.denied &&= %IsSmi(d.remaining) && d.remaining === 1; }
process.stdout.write(JSON.stringify(seen));`;
    const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", script], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(JSON.parse(r.stdout)).toEqual({ allowed: true, denied: true });
  }, 30_000);
});
