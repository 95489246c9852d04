/**
 * A cost above a sliding log's limit, asked of a memory store directly (`MemoryStore.bind()` is
 * public: custom stores and adapters call the `BoundStore` interface). Such a request can never
 * be admitted (at most `limit - cost` units may be inside the window): bad input, refused with
 * RateLimiter's RangeError as every store refuses it (store-cost-over-capacity.test.ts runs every
 * algorithm through every store), before any key is looked up or made; consume and peek, one
 * limit or several (check()), rows or rings as objects.
 *
 * Why the log needs its own test: it reads the unit `limit - cost + 1` positions back, a position
 * past its ring for such a cost; with the rows of LogRowTable (a key's first ring in a row of its
 * index) that is the next key's row, so the answer came from another key's times (a negative
 * retryAfterMs on an empty key). The store no longer asks the log; the log itself still reads only
 * its own ring for such a cost, whoever calls it (the last test).
 */
import { describe, expect, it } from "vitest";
import { consumeIn, FIRST_CAPACITY } from "../src/core/algorithms/sliding-log.js";
import { newOutcome } from "../src/core/decision.js";
import { MemoryStore, resolveLimits, type BoundStore, type Decision, type LimitSpec, type ResolvedLimit } from "../src/index.js";
import { singleTable } from "../src/stores/memory-kinds.js";

const T0 = 1_764_236_401_237;
const WINDOW = 60_000;

const refusal = (cost: number, max: number) => `cost: ${cost} is more than this policy could ever admit (at most ${max})`;

/**
 * Three keys in one store: `a` (the key asked), and its neighbours `b` and `c` (made before and
 * after it: their rows sit beside `a`'s), each with `used[i]` units logged at its own times.
 */
function store(specs: LimitSpec[], used: [number, number, number], rows = true): { s: MemoryStore; b: BoundStore } {
  const s = new MemoryStore({ sweepIntervalMs: 0 });
  const limits = resolveLimits(specs);
  const b = rows ? s.bind(limits, "n") : singleTable(s, limits, false);
  ["b", "a", "c"].forEach((key, i) => {
    for (let u = 0; u < used[i === 0 ? 1 : i === 1 ? 0 : 2]; u++) {
      const d = b.consume(key, 1, T0 + 1000 * i + 37 * u) as Decision;
      expect(d.allowed).toBe(true);
    }
  });
  return { s, b };
}

describe("a cost above a sliding log's limit, asked of the memory store directly", () => {
  for (const limit of [1, 3, 7, 8, 20]) {
    for (const rows of [true, false]) {
      it(`limit ${limit}${rows ? "" : " (rings as objects)"}: refused (RangeError), nothing read or changed`, () => {
        const spec: LimitSpec = { algorithm: "sliding-log", limit, window: WINDOW };
        for (const usedA of [0, 1, limit]) {
          for (const cost of [limit + 1, limit + 2, 2 * limit + 9]) {
            const now = T0 + 5000;
            for (const other of [0, 1, limit]) {
              const { s, b } = store([spec], [usedA, other, other], rows);
              const held = [s.size, s.bytes];
              expect(() => b.consume("a", cost, now), `consume of cost ${cost}`).toThrow(new RangeError(refusal(cost, limit)));
              expect(() => b.peek("a", cost, now), `peek of cost ${cost}`).toThrow(new RangeError(refusal(cost, limit)));
              expect(() => b.consume("new", cost, now), "a key never seen").toThrow(RangeError);
              expect([s.size, s.bytes], "no key made, no byte counted").toEqual(held);
              // Nothing changed: `a` still takes what it had left, its neighbours what they had left.
              for (const [key, used] of [
                ["a", usedA],
                ["b", other],
                ["c", other],
              ] as const) {
                for (let u = used; u < limit; u++) expect((b.consume(key, 1, now) as Decision).allowed, `${key} unit ${u}`).toBe(true);
                expect((b.consume(key, 1, now) as Decision).allowed, `${key} full`).toBe(false);
              }
            }
          }
        }
      });
    }
  }

  it("several limits: a cost above the log's limit (within the other's) is refused, and charges neither", () => {
    const specs: LimitSpec[] = [
      { algorithm: "sliding-log", limit: 3, window: WINDOW },
      { algorithm: "fixed-window", limit: 10, window: WINDOW },
    ];
    for (const other of [0, 3]) {
      const { b } = store(specs, [1, other, other]);
      expect(() => b.consume("a", 5, T0 + 5000)).toThrow(new RangeError(refusal(5, 3)));
      expect(() => b.peek("a", 5, T0 + 5000)).toThrow(new RangeError(refusal(5, 3)));
      // Neither limit was charged: `a` takes its 2 units left of the log, and a cost of exactly the limit still decides.
      expect((b.consume("a", 2, T0 + 5000) as Decision).allowed).toBe(true);
      expect((b.consume("a", 1, T0 + 5000) as Decision).allowed).toBe(false);
      expect((b.peek("a", 3, T0 + 5000 + WINDOW) as Decision).allowed).toBe(true);
    }
  });

  it("the log itself, asked such a cost on a memory store's row, reads only its own ring and writes nothing", () => {
    for (const limit of [1, 3, 7, 20]) {
      const lim = resolveLimits([{ algorithm: "sliding-log", limit, window: WINDOW }])[0] as ResolvedLimit;
      const width = Math.min(limit, FIRST_CAPACITY) + 1;
      for (const usedA of [0, 1, Math.min(limit, FIRST_CAPACITY)]) {
        // Three rows side by side, as LogRowTable's index holds them: `a` is the middle one.
        const rows = new Float64Array(3 * width);
        const states = [0, 1, 2].map(() => ({ a: 0, b: 0, ring: null }));
        states.forEach((st, i) => {
          const used = i === 1 ? usedA : Math.min(limit, FIRST_CAPACITY);
          for (let u = 0; u < used; u++) consumeIn(st, rows, i * width, width - 1, 1000 * (i + 1) + 37 * u, 1, lim, newOutcome());
        });
        const rowsBefore = Array.from(rows);
        const a = states[1] as { a: number; b: number; ring: null };
        const stateBefore = { ...a };
        for (const cost of [limit + 1, 2 * limit + 9]) {
          const out = newOutcome();
          consumeIn(a, rows, width, width - 1, 5000, cost, lim, out);
          expect(out.allowed).toBe(false);
          expect(out.remaining, `limit ${limit}, a used ${usedA}, cost ${cost}`).toBe(limit - usedA);
          // Both waits: until no unit of `a` is inside the window (its newest logged at 2000 + 37 (usedA - 1)).
          const clear = usedA === 0 ? 0 : 2000 + 37 * (usedA - 1) + WINDOW - 5000;
          expect([out.retryAfterMs, out.resetAfterMs], `limit ${limit}, a used ${usedA}, cost ${cost}`).toEqual([clear, clear]);
        }
        expect(Array.from(rows)).toEqual(rowsBefore);
        expect(a).toEqual(stateBefore);
      }
    }
  });
});
