/**
 * Quota leasing's bound, with a manual clock and up to four simulated instances sharing one
 * key (stores/leased-table.ts over the in-memory reference source): random traffic, bursts of
 * concurrent decisions, block expiries and instances that stop (giving their units back).
 * - fixed window (aligned on the clock): never more than `limit` admitted in any window, over
 *   every instance together: exact;
 * - fixed window with refunds (each of an instance's own admission, in the window it was made
 *   in): admitted less refunded never more than `limit` in any window;
 * - token bucket, leaky bucket (police), GCRA: in any span of T ms, at most
 *   capacity + limit x (T + blockMs) / window: the bucket's own bound, stretched by one block's life.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { resolveLimit, type LimitSpec } from "../src/index.js";
import { ALGORITHM_IMPLS } from "../src/core/algorithms/index.js";
import { LeasedTable } from "../src/stores/leased-table.js";
import type { ResolvedLimit } from "../src/core/options.js";
import type { BoundStore } from "../src/index.js";
import { MemoryBlockSource, SharedState, UNUSED } from "./lease-source-model.js";

type Op =
  | { kind: "consume"; dt: number; inst: number; n: number; cost: number; spread: number }
  | { kind: "close"; dt: number; inst: number }
  | { kind: "refund"; dt: number; inst: number };

const specArb: fc.Arbitrary<LimitSpec> = fc.oneof(
  fc.record({
    algorithm: fc.constant("fixed-window" as const),
    limit: fc.integer({ min: 1, max: 40 }),
    window: fc.integer({ min: 50, max: 2000 }),
  }),
  fc.record({
    algorithm: fc.constant("token-bucket" as const),
    limit: fc.integer({ min: 1, max: 40 }),
    window: fc.integer({ min: 50, max: 2000 }),
    capacity: fc.integer({ min: 1, max: 60 }),
  }),
  fc.record({
    algorithm: fc.constant("leaky-bucket" as const),
    limit: fc.integer({ min: 1, max: 40 }),
    window: fc.integer({ min: 50, max: 2000 }),
    capacity: fc.integer({ min: 1, max: 60 }),
  }),
  fc.record({
    algorithm: fc.constant("gcra" as const),
    limit: fc.integer({ min: 1, max: 40 }),
    window: fc.integer({ min: 50, max: 2000 }),
    burst: fc.integer({ min: 0, max: 30 }),
  }),
);

const opsArb = (instances: number, refunds = false): fc.Arbitrary<Op[]> =>
  fc.array(
    fc.oneof(
      {
        weight: refunds ? 4 : 0,
        arbitrary: fc.record({
          kind: fc.constant("refund" as const),
          dt: fc.integer({ min: 0, max: 50 }),
          inst: fc.integer({ min: 0, max: instances - 1 }),
        }),
      },
      {
        weight: 12,
        arbitrary: fc.record({
          kind: fc.constant("consume" as const),
          dt: fc.oneof(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 400 })),
          inst: fc.integer({ min: 0, max: instances - 1 }),
          n: fc.integer({ min: 1, max: 6 }),
          cost: fc.integer({ min: 1, max: 3 }),
          spread: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 60 })),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant("close" as const),
          dt: fc.integer({ min: 0, max: 50 }),
          inst: fc.integer({ min: 0, max: instances - 1 }),
        }),
      },
    ),
    { minLength: 1, maxLength: 80 },
  );

/**
 * Runs the traffic; returns every admission as [time, cost], and every refund as [time of the
 * admission refunded, -cost]. A refund gives back the instance's latest admission not yet
 * refunded, when it was made in the current window (fixed window only).
 */
async function simulate(lim: ResolvedLimit, instances: number, blockMs: number, t0: number, ops: Op[]): Promise<Array<[number, number]>> {
  const shared = new SharedState(lim);
  // Refunds that reach the shared state: the algorithm's own refund on it.
  const inner: BoundStore = {
    ...UNUSED,
    refund: (key, cost, nowMs) => {
      const st = shared.states.get(key);
      if (st !== undefined) ALGORITHM_IMPLS[lim.algorithm].refund(st, nowMs as number, cost, lim);
    },
  };
  const tables = Array.from(
    { length: instances },
    (_, i) => new LeasedTable(lim, new MemoryBlockSource(shared, `i${i}`, 4 * blockMs), inner, { blockMs, maxKeys: 10 }),
  );
  const admitted: Array<[number, number]> = [];
  const mine: Array<Array<[number, number]>> = tables.map(() => []);
  let t = t0;
  const deadline = Date.now() + 5_000;
  for (const op of ops) {
    t += op.dt;
    const table = tables[op.inst] as LeasedTable;
    if (op.kind === "close") {
      await table.close();
      continue;
    }
    if (op.kind === "refund") {
      const last = (mine[op.inst] as Array<[number, number]>).pop();
      if (last !== undefined && Math.floor(last[0] / lim.windowMs) === Math.floor(t / lim.windowMs)) {
        await table.refund("hot", last[1], t);
        admitted.push([last[0], -last[1]]);
      }
      continue;
    }
    if (Date.now() > deadline) throw new Error("simulation did not finish: a decision never resolved?");
    const cost = Math.min(op.cost, lim.capacity);
    // n decisions `spread` ms apart, all asked before any is answered: the later ones wait for the
    // first one's take, and may be due after its block ends (a window boundary).
    const times = Array.from({ length: op.n }, (_, i) => t + i * op.spread);
    const all = Promise.all(times.map((at) => Promise.resolve(table.consume("hot", cost, at))));
    const ds = await Promise.race([
      all,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("a decision never resolved")), 2_000)),
    ]);
    ds.forEach((d, i) => {
      if (!d.allowed) return;
      admitted.push([times[i] as number, cost]);
      (mine[op.inst] as Array<[number, number]>).push([times[i] as number, cost]);
    });
    t = times[times.length - 1] as number;
  }
  return admitted;
}

describe("quota leasing against the limit's bound, many instances", () => {
  // Without refunds, and with refunds of admissions made in the same window, by every instance,
  // through the live block or the shared state: net of refunds, never more than limit in a window.
  for (const refunds of [false, true]) {
    const name = refunds
      ? "fixed window with refunds: admitted less refunded never more than limit in any window"
      : "fixed window: never more than limit in any window, over every instance";
    it(name, async () => {
      await fc.assert(
        fc.asyncProperty(
          specArb.filter((s) => s.algorithm === "fixed-window"),
          fc.integer({ min: 1, max: 4 }).chain((n) => fc.tuple(fc.constant(n), opsArb(n, refunds))),
          fc.integer({ min: 1, max: 500 }),
          fc.integer({ min: 0, max: 2 ** 40 }),
          async (spec, [instances, ops], blockMs, t0) => {
            const lim = resolveLimit(spec);
            const perWindow = new Map<number, number>();
            for (const [t, c] of await simulate(lim, instances, blockMs, t0, ops)) {
              const w = Math.floor(t / lim.windowMs);
              perWindow.set(w, (perWindow.get(w) ?? 0) + c);
            }
            for (const [w, n] of perWindow) expect(n, `window ${w}`).toBeLessThanOrEqual(lim.limit);
          },
        ),
        { numRuns: 300 },
      );
    });
  }

  it("buckets and GCRA: at most capacity + limit x (T + blockMs) / window in any span of T ms", async () => {
    await fc.assert(
      fc.asyncProperty(
        specArb.filter((s) => s.algorithm !== "fixed-window"),
        fc.integer({ min: 1, max: 4 }).chain((n) => fc.tuple(fc.constant(n), opsArb(n))),
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        async (spec, [instances, ops], blockMs, t0) => {
          const lim = resolveLimit(spec);
          const a = await simulate(lim, instances, blockMs, t0, ops);
          let worst = "";
          for (let i = 0; i < a.length && worst === ""; i++) {
            let sum = 0;
            for (let j = i; j < a.length; j++) {
              sum += (a[j] as [number, number])[1];
              const span = (a[j] as [number, number])[0] - (a[i] as [number, number])[0];
              const bound = lim.capacity + Math.ceil((lim.limit * (span + blockMs)) / lim.windowMs);
              if (sum > bound) {
                worst = `${sum} admitted in ${span} ms (bound ${bound})`;
                break;
              }
            }
          }
          expect(worst).toBe("");
        },
      ),
      { numRuns: 300 },
    );
  });
});
