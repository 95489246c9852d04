/**
 * A cost above a sliding log's limit, asked of a memory store directly (`MemoryStore.bind()` is
 * public: custom stores and adapters call the `BoundStore` interface, which sets no bound on the
 * cost; only `RateLimiter` refuses such a cost with a RangeError). Such a request can never be
 * admitted (at most `limit - cost` units may be inside the window), so it is a denial that
 * touches nothing, decided from this key alone. Before, the log read the unit `limit - cost + 1`
 * positions back, a position past its ring: with the rows of LogRowTable (a key's first ring in
 * a row of its index) that is the next key's row, so the denial's `retryAfterMs` and
 * `resetAfterMs` came from another key's times (negative on an empty key), and `remaining` could
 * exceed the limit; consume and peek alike, with one limit or several.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore, resolveLimits, type BoundStore, type Decision, type LimitSpec } from "../src/index.js";
import { singleTable } from "../src/stores/memory-kinds.js";

const T0 = 1_764_236_401_237;
const WINDOW = 60_000;

const numbers = (d: Decision) => [d.allowed, d.remaining, d.retryAfterMs, d.resetAfterMs];

/**
 * Three keys in one store: `a` (the key asked), and its neighbours `b` and `c` (made before and
 * after it: their rows sit beside `a`'s), each with `used[i]` units logged at its own times.
 */
function store(specs: LimitSpec[], used: [number, number, number], rows = true): BoundStore {
  const s = new MemoryStore({ sweepIntervalMs: 0 });
  const limits = resolveLimits(specs);
  const b = rows ? s.bind(limits, "n") : singleTable(s, limits, false);
  ["b", "a", "c"].forEach((key, i) => {
    for (let u = 0; u < used[i === 0 ? 1 : i === 1 ? 0 : 2]; u++) {
      const d = b.consume(key, 1, T0 + 1000 * i + 37 * u) as Decision;
      expect(d.allowed).toBe(true);
    }
  });
  return b;
}

describe("a cost above a sliding log's limit, asked of the memory store directly", () => {
  for (const limit of [1, 3, 7, 8, 20]) {
    for (const rows of [true, false]) {
      it(`limit ${limit}${rows ? "" : " (rings as objects)"}: denied, nothing read of another key, nothing changed`, () => {
        const spec: LimitSpec = { algorithm: "sliding-log", limit, window: WINDOW };
        for (const usedA of [0, 1, limit]) {
          for (const cost of [limit + 1, limit + 2, 2 * limit + 9]) {
            const now = T0 + 5000;
            const answers: unknown[][] = [];
            // The same key `a` beside neighbours of different states: the answer must not change.
            for (const other of [0, 1, limit]) {
              const b = store([spec], [usedA, other, other], rows);
              const d = b.consume("a", cost, now) as Decision;
              const p = b.peek("a", cost, now) as Decision;
              expect(numbers(p), `peek of cost ${cost}`).toEqual(numbers(d));
              expect(d.allowed).toBe(false);
              expect(d.remaining, `cost ${cost}, a used ${usedA}`).toBe(limit - usedA);
              for (const ms of [d.retryAfterMs, d.resetAfterMs]) {
                expect(Number.isFinite(ms) && ms >= 0 && ms <= WINDOW, `cost ${cost}, a used ${usedA}: ${ms}`).toBe(true);
              }
              answers.push(numbers(d));
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
            expect(answers[1], `cost ${cost}, a used ${usedA}: the same beside other neighbours`).toEqual(answers[0]);
            expect(answers[2], `cost ${cost}, a used ${usedA}: the same beside other neighbours`).toEqual(answers[0]);
          }
        }
      });
    }
  }

  it("several limits: a cost above the log's limit (within the other's) is denied, and charges neither", () => {
    const specs: LimitSpec[] = [
      { algorithm: "sliding-log", limit: 3, window: WINDOW },
      { algorithm: "fixed-window", limit: 10, window: WINDOW },
    ];
    for (const other of [0, 3]) {
      const b = store(specs, [1, other, other]);
      const d = b.consume("a", 5, T0 + 5000) as Decision;
      expect(numbers(b.peek("a", 5, T0 + 5000) as Decision)).toEqual(numbers(d));
      expect(d.allowed).toBe(false);
      expect(d.remaining).toBe(2);
      for (const ms of [d.retryAfterMs, d.resetAfterMs]) expect(Number.isFinite(ms) && ms >= 0 && ms <= WINDOW, String(ms)).toBe(true);
      // Neither limit was charged: `a` takes its 2 units left of the log.
      expect((b.consume("a", 2, T0 + 5000) as Decision).allowed).toBe(true);
      expect((b.consume("a", 1, T0 + 5000) as Decision).allowed).toBe(false);
    }
  });
});
