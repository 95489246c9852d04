/**
 * Space-Saving against exact counts: for any stream, every monitored item's true count is within
 * [count - error, count], every error is at most N / capacity, every item above N / capacity is
 * monitored, and memory never grows past capacity.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SpaceSaving } from "../src/dashboard/space-saving.js";

const streamArb = fc.array(
  fc.record({
    // A skewed alphabet: a few heavy items among many light ones.
    item: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom("a", "b", "c") },
      { weight: 2, arbitrary: fc.integer({ min: 0, max: 200 }).map(String) },
    ),
    weight: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 5 })),
  }),
  { maxLength: 600 },
);

describe("SpaceSaving", () => {
  it("holds its error bound against exact counts on any stream", () => {
    fc.assert(
      fc.property(streamArb, fc.integer({ min: 1, max: 40 }), (stream, capacity) => {
        const sketch = new SpaceSaving(capacity);
        const exact = new Map<string, number>();
        for (const { item, weight } of stream) {
          sketch.offer(item, weight);
          exact.set(item, (exact.get(item) ?? 0) + weight);
          expect(sketch.size).toBeLessThanOrEqual(capacity);
        }
        const N = stream.reduce((n, s) => n + s.weight, 0);
        expect(sketch.total).toBe(N);
        const top = sketch.top();
        const monitored = new Set(top.map((t) => t.item));
        for (const t of top) {
          const truth = exact.get(t.item) ?? 0;
          expect(t.count - t.error).toBeLessThanOrEqual(truth);
          expect(t.count).toBeGreaterThanOrEqual(truth);
          expect(t.error).toBeLessThanOrEqual(N / capacity);
        }
        for (const [item, count] of exact) if (count > N / capacity) expect(monitored.has(item), `${item}: ${count} of ${N}`).toBe(true);
        // Sorted, highest first.
        for (let i = 1; i < top.length; i++) expect(top[i - 1]!.count).toBeGreaterThanOrEqual(top[i]!.count);
        // The counts always add up to the total (each unit of weight is counted in exactly one place).
        expect(top.reduce((n, t) => n + t.count, 0)).toBe(N);
      }),
      { numRuns: 500 },
    );
  });

  it("is exact while fewer distinct items than its capacity have been seen", () => {
    const s = new SpaceSaving<string>(4);
    for (const [item, n] of [
      ["x", 5],
      ["y", 2],
      ["z", 9],
    ] as const)
      for (let i = 0; i < n; i++) s.offer(item, 1, `rule-${item}`);
    expect(s.top()).toEqual([
      { item: "z", count: 9, error: 0, payload: "rule-z" },
      { item: "x", count: 5, error: 0, payload: "rule-x" },
      { item: "y", count: 2, error: 0, payload: "rule-y" },
    ]);
  });

  it("a flood of distinct keys keeps the heavy hitter on top and the table at its capacity", () => {
    const s = new SpaceSaving(16);
    for (let i = 0; i < 100_000; i++) {
      s.offer(`flood-${i}`);
      if (i % 10 === 0) s.offer("attacker");
    }
    expect(s.size).toBe(16);
    const [first] = s.top(1);
    expect(first!.item).toBe("attacker");
    expect(first!.count - first!.error).toBeLessThanOrEqual(10_000);
    expect(first!.count).toBeGreaterThanOrEqual(10_000);
  });

  it("rejects a bad capacity", () => {
    expect(() => new SpaceSaving(0)).toThrow(/capacity: must be a whole number >= 1/);
  });
});
