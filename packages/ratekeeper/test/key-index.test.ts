/**
 * KeyIndex (the memory store's key table) against a Map: the same answers after any sequence of
 * sets, gets and deletes, colliding hashes and growth included.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hashKey, KeyIndex } from "../src/stores/key-index.js";

const keyArb = fc.oneof(
  fc.integer({ min: 0, max: 40 }).map((i) => `k${i}`),
  fc.string({ maxLength: 6 }),
  fc.constantFrom("", "ä", "\u{1F600}", "user:1", "user:10"),
);
const opArb = fc.oneof(
  fc.record({ op: fc.constant("set" as const), key: keyArb, value: fc.integer() }),
  fc.record({ op: fc.constant("delete" as const), key: keyArb }),
  fc.record({ op: fc.constant("get" as const), key: keyArb }),
  fc.record({ op: fc.constant("sweep" as const), mod: fc.integer({ min: 2, max: 5 }) }),
);

/** The FNV state after a key's first code unit `a` (its second one 0), from hashKey's result. */
function stateAfter(a: number): number {
  let h = hashKey(String.fromCharCode(a, 0));
  h ^= h >>> 16; // the avalanche, undone step by step (the multipliers' inverses mod 2^32)
  h = Math.imul(h, 0x7ed1b41d);
  h ^= (h >>> 13) ^ (h >>> 26);
  h = Math.imul(h, 0xa5cb9243);
  h ^= h >>> 16;
  return Math.imul(h, 0x359c449b) >>> 0; // the FNV step of the second unit (0), undone
}

/** Two different keys of equal hashKey (see the test). */
function equalHashPair(): [string, string] {
  const byHigh = new Map<number, number>();
  for (let a = 0x100; a < 0x10000; a++) {
    const high = stateAfter(a) >>> 16;
    const c = byHigh.get(high);
    if (c !== undefined) return [String.fromCharCode(a, 0x41), String.fromCharCode(c, 0x41 ^ ((stateAfter(a) ^ stateAfter(c)) & 0xffff))];
    byHigh.set(high, a);
  }
  throw new Error("unreachable: 65,280 states in 65,536 high halves");
}

describe("KeyIndex", () => {
  it("answers like a Map after any sequence of operations", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 300 }), (ops) => {
        const idx = new KeyIndex<number>();
        const ref = new Map<string, number>();
        for (const o of ops) {
          if (o.op === "set") {
            idx.set(o.key, o.value);
            ref.set(o.key, o.value);
          } else if (o.op === "delete") {
            expect(idx.delete(o.key)).toBe(ref.delete(o.key));
          } else if (o.op === "get") {
            expect(idx.get(o.key)).toBe(ref.get(o.key));
            expect(idx.has(o.key)).toBe(ref.has(o.key));
          } else {
            idx.deleteWhere((_k, v) => v % o.mod === 0);
            idx.compact();
            for (const [k, v] of [...ref]) if (v % o.mod === 0) ref.delete(k);
          }
          expect(idx.size).toBe(ref.size);
        }
        expect(new Map(idx.entries())).toEqual(ref);
        for (const k of ref.keys()) expect(idx.get(k)).toBe(ref.get(k));
      }),
      { numRuns: 500 },
    );
  });

  it("stays correct with many keys, deletes in the middle of probe runs, and regrowth", () => {
    const idx = new KeyIndex<number>();
    const ref = new Map<string, number>();
    for (let i = 0; i < 20_000; i++) {
      idx.set(`user:${i}`, i);
      ref.set(`user:${i}`, i);
      if (i % 3 === 0) {
        const k = `user:${(i * 7919) % (i + 1)}`;
        expect(idx.delete(k)).toBe(ref.delete(k));
      }
    }
    expect(idx.size).toBe(ref.size);
    for (let i = 0; i < 20_000; i++) expect(idx.get(`user:${i}`)).toBe(ref.get(`user:${i}`));
  });

  it("deletes correctly in probe runs that wrap around the end of the table", () => {
    // Keys whose home is one of the last slots of the smallest table (16 slots), so their probe
    // runs wrap to the front; every order of deletions must leave the rest findable.
    const home = (k: string) => hashKey(k) & 15;
    const pick = (slot: number, n: number) => {
      const out: string[] = [];
      for (let i = 0; out.length < n; i++) if (home(`w${i}`) === slot) out.push(`w${i}`);
      return out;
    };
    const keys = [...pick(15, 3), ...pick(14, 2), ...pick(0, 1), ...pick(1, 1)];
    fc.assert(
      fc.property(
        fc.shuffledSubarray(keys, { minLength: keys.length, maxLength: keys.length }),
        fc.shuffledSubarray(keys),
        (order, dels) => {
          const idx = new KeyIndex<string>();
          for (const k of order) idx.set(k, k);
          const left = new Set(order);
          for (const d of dels) {
            expect(idx.delete(d)).toBe(true);
            left.delete(d);
            for (const k of keys) expect(idx.get(k), `after deleting ${d}`).toBe(left.has(k) ? k : undefined);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("hashes equal strings alike whatever object holds them, and spreads similar keys", () => {
    const built = ["user", "42"].join(":");
    expect(hashKey(built)).toBe(hashKey("user:42"));
    const low = new Set<number>();
    for (let i = 0; i < 4096; i++) low.add(hashKey(`10.0.${i >> 8}.${i & 255}`) & 4095);
    expect(low.size).toBeGreaterThan(2400); // a random function fills about 63% of the slots
  });
  it("keeps 4 bytes a slot: 100,000 keys in a table of at most 1 MiB", () => {
    // The slots are read at a random place on every lookup, whatever the order of the keys; an
    // 8-byte (hash, entry) pair made them 2 MiB here, most of a decision's time over 100,000 keys
    // (docs/benchmarks/memory.md, "The key table at 4 bytes a slot").
    const idx = new KeyIndex<number>();
    for (let i = 0; i < 100_000; i++) idx.set(`user:${i}`, i);
    expect(idx.tableBytes).toBeLessThanOrEqual(1 << 20);
    for (let i = 0; i < 100_000; i += 997) expect(idx.get(`user:${i}`)).toBe(i);
  });

  it("compact() after a sweep gives back the slots, arrays and rows of the keys gone, and keeps every entry's value and row", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4000 }), fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: 3 }), (n, keepEvery, w) => {
        const idx = new KeyIndex<number>(w);
        const row = (i: number) => Float64Array.from({ length: w }, (_, j) => i * 10 + j + 0.5);
        for (let i = 0; i < n; i++) {
          idx.set(`k${i}`, i);
          idx.rowIn(`k${i}`, row(i));
        }
        const peakSlots = idx.tableBytes / 4;
        idx.deleteWhere((_k, v) => v % keepEvery !== 0);
        idx.compact();
        const left = Math.ceil(n / keepEvery);
        expect(idx.size).toBe(left);
        // Slots a quarter full at most after a compaction that ran, never grown by one.
        expect(idx.tableBytes / 4).toBeLessThanOrEqual(Math.max(16, peakSlots, 4 * left));
        if (8 * left <= peakSlots && peakSlots > 16) expect(idx.tableBytes / 4).toBeLessThanOrEqual(Math.max(16, 8 * left));
        expect(idx.rows.length).toBeLessThanOrEqual(2 * Math.max(8, Math.ceil(1.5 * left)) * w);
        const out = new Float64Array(w);
        const check = () => {
          for (let i = 0; i < n; i++) {
            expect(idx.get(`k${i}`)).toBe(i % keepEvery === 0 ? i : undefined);
            if (i % keepEvery !== 0) continue;
            idx.rowOut(`k${i}`, out);
            expect([...out]).toEqual([...row(i)]);
          }
        };
        check();
        for (let i = n; i < n + 300; i++) idx.set(`k${i}`, i * keepEvery); // growth again after it
        check();
        for (let i = n; i < n + 300; i++) expect(idx.get(`k${i}`)).toBe(i * keepEvery);
      }),
      { numRuns: 60 },
    );
  });

  it("tells apart keys whose whole hash is equal (slot and tag alike), through growth and deletes", () => {
    // Such keys share their slot's home and its tag at every size of the table, so only the key
    // comparison tells them apart. Made, whatever the process's seed, by undoing hashKey's final
    // avalanche and last FNV step: two keys of two code units (a, b) and (c, d) hash alike when
    // the FNV state after a and after c agree in their high 16 bits and b ^ d is their low ones.
    const [x, y] = equalHashPair();
    expect(hashKey(x)).toBe(hashKey(y));
    expect(x).not.toBe(y);
    const idx = new KeyIndex<string>();
    idx.set(x, "x");
    expect(idx.get(y)).toBeUndefined();
    idx.set(y, "y");
    for (let i = 0; i < 1000; i++) idx.set(`f${i}`, `f${i}`); // grows the table 7 times
    expect([idx.get(x), idx.get(y)]).toEqual(["x", "y"]);
    expect(idx.delete(x)).toBe(true);
    expect([idx.get(x), idx.get(y)]).toEqual([undefined, "y"]);
    idx.set(x, "x2");
    expect(idx.delete(y)).toBe(true);
    expect([idx.get(x), idx.get(y), idx.size]).toEqual(["x2", undefined, 1001]);
    for (let i = 0; i < 1000; i++) expect(idx.get(`f${i}`)).toBe(`f${i}`);
  });
});
