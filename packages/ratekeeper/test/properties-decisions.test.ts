/**
 * The decision fields are truthful, for every algorithm and option, and several limits are
 * all-or-nothing: properties over random traffic, manual time only.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Evaluator } from "../src/core/evaluate.js";
import { resolveLimits, type LimitSpec, type LimitState } from "../src/index.js";
import { anySpecArb, bigSpecArb, limitsWithTraffic, opsArb, specArbs, startArb, windowOf, type Op } from "./arbitraries.js";
import { driver, History, modelDecide, snapshotOf, type Driver } from "./core-models.js";

const RUNS = 300;

/** Runs `ops` (consumes that commit when allowed, refunds; peeks are skipped) and returns the time reached. */
function replay(d: Driver, t0: number, ops: readonly Op[]): number {
  let t = t0;
  for (const op of ops) {
    t += op.dt;
    const c = Math.min(op.c, d.lim.capacity);
    if (op.kind === "refund") d.refund(t, c);
    else if (op.kind === "consume" && d.check(t, c).allowed) d.commit(t, c);
  }
  return t;
}

const scenarioArb = (specArb: fc.Arbitrary<LimitSpec>) =>
  specArb.chain((spec) =>
    fc.tuple(
      fc.constant(spec),
      startArb,
      opsArb(windowOf(spec), 30, true),
      fc.integer({ min: 0, max: 2 * windowOf(spec) }),
      fc.integer({ min: 1, max: 8 }),
    ),
  );

/** Replays a scenario's traffic, then decides its last request (changing nothing). */
function decideAfter([spec, t0, ops, dt, cost]: [LimitSpec, number, Op[], number, number]) {
  const d = driver(spec);
  const t = replay(d, t0, ops) + dt;
  const c = Math.min(cost, d.lim.capacity);
  return { d, t, c, out: d.check(t, c) };
}

describe.each(Object.keys(specArbs))("%s: decision fields", (name) => {
  const specArb = specArbs[name] as fc.Arbitrary<LimitSpec>;

  it("retryAfterMs is truthful and tight: the same cost succeeds after exactly retryAfterMs, and not 1 ms sooner", () => {
    fc.assert(
      fc.property(scenarioArb(specArb), (scenario) => {
        const { d, t, c, out } = decideAfter(scenario);
        if (out.allowed) return;
        expect(out.retryAfterMs).toBeGreaterThan(0);
        expect(d.check(t + out.retryAfterMs, c).allowed).toBe(true);
        expect(d.check(t + out.retryAfterMs - 1, c).allowed).toBe(false);
      }),
      { numRuns: RUNS },
    );
  });

  it("resetAfterMs: after it a request of the full capacity succeeds, and not 1 ms sooner", () => {
    fc.assert(
      fc.property(scenarioArb(specArb), (scenario) => {
        const { d, t, c, out } = decideAfter(scenario);
        if (out.allowed) d.commit(t, c); // an allowed decision reports the reset after its own admission
        const full = d.lim.capacity;
        expect(d.check(t + out.resetAfterMs, full).allowed).toBe(true);
        if (out.resetAfterMs > 0) expect(d.check(t + out.resetAfterMs - 1, full).allowed).toBe(false);
        else expect(out.allowed).toBe(false); // 0 only when the key is already empty, so never after an admission
      }),
      { numRuns: RUNS },
    );
  });

  it("remaining: exactly that many more unit requests pass right now", () => {
    fc.assert(
      fc.property(scenarioArb(specArb), (scenario) => {
        const { d, t, c, out } = decideAfter(scenario);
        if (out.allowed) d.commit(t, c);
        let passed = 0;
        while (d.check(t, 1).allowed && passed <= d.lim.capacity) {
          d.commit(t, 1);
          passed++;
        }
        expect(passed).toBe(out.remaining);
      }),
      { numRuns: RUNS },
    );
  });
});

describe("large limits, windows and costs: retryAfterMs and resetAfterMs stay truthful and tight", () => {
  const arb = bigSpecArb.chain((spec) => {
    const cap = driver(spec).lim.capacity;
    const w = windowOf(spec);
    const ops = fc.array(
      fc.record({
        kind: fc.constantFrom("consume" as const, "consume" as const, "refund" as const),
        dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: w }), fc.integer({ min: 0, max: Math.max(1, Math.floor(w / 1000)) })),
        c: fc.oneof(fc.integer({ min: 1, max: cap }), fc.constant(cap)),
      }),
      { minLength: 1, maxLength: 20 },
    );
    return fc.tuple(fc.constant(spec), startArb, ops, fc.integer({ min: 0, max: w }), fc.integer({ min: 1, max: cap }));
  });

  it("retryAfterMs, resetAfterMs", () => {
    fc.assert(
      fc.property(arb, ([spec, t0, ops, dt, c]) => {
        const d = driver(spec);
        const t = replay(d, t0, ops) + dt;
        const out = d.check(t, c);
        if (!out.allowed) {
          expect(d.check(t + out.retryAfterMs, c).allowed).toBe(true);
          expect(d.check(t + out.retryAfterMs - 1, c).allowed).toBe(false);
        } else d.commit(t, c);
        expect(d.check(t + out.resetAfterMs, d.lim.capacity).allowed).toBe(true);
        if (out.resetAfterMs > 0) expect(d.check(t + out.resetAfterMs - 1, d.lim.capacity).allowed).toBe(false);
      }),
      { numRuns: 400 },
    );
  });
});

describe("leaky bucket as a queue (shape)", () => {
  it("the nth request queued at one instant waits ceil((n - 1) x window / limit) ms; the (capacity + 1)th is rejected", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom(1, 7, 1000, 60_000),
        fc.integer({ min: 1, max: 12 }),
        startArb,
        (limit, windowMs, capacity, t) => {
          const d = driver({ algorithm: "leaky-bucket", mode: "shape", limit, window: windowMs, capacity });
          for (let n = 1; n <= capacity; n++) {
            const out = d.check(t, 1);
            expect(out.allowed).toBe(true);
            expect(out.delayMs).toBe(Math.ceil(((n - 1) * windowMs) / limit));
            d.commit(t, 1);
          }
          const over = d.check(t, 1);
          expect(over.allowed).toBe(false);
          expect(over.delayMs).toBe(0);
          expect(over.retryAfterMs).toBe(Math.ceil(windowMs / limit));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("delays follow the leak: requests leave in arrival order, one unit per window / limit, never earlier", () => {
    const arb = specArbs["leaky-bucket shape"] as fc.Arbitrary<LimitSpec>;
    fc.assert(
      fc.property(
        arb.chain((spec) => fc.tuple(fc.constant(spec), startArb, opsArb(windowOf(spec), 40, false))),
        ([spec, t0, ops]) => {
          const d = driver(spec);
          const { limit, windowMs } = d.lim;
          let t = t0;
          let prevStart = Number.NEGATIVE_INFINITY; // when the previous admitted request starts, x limit
          let prevCost = 0;
          for (const op of ops) {
            t += op.dt;
            const c = Math.min(op.c, d.lim.capacity);
            if (op.kind !== "consume") continue;
            const out = d.check(t, c);
            if (!out.allowed) continue;
            d.commit(t, c);
            const start = (t + out.delayMs) * limit;
            // FIFO and the leak rate: this one starts no sooner than the previous one's service (its
            // cost x window / limit ms) is over, and at most 1 ms later (rounding up to whole ms).
            expect(start).toBeGreaterThanOrEqual(prevStart + prevCost * windowMs);
            expect(Math.max(t * limit, prevStart + prevCost * windowMs)).toBeGreaterThan(start - limit);
            prevStart = Math.max(t * limit, prevStart + prevCost * windowMs); // the exact start
            prevCost = c;
          }
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe("one or several limits on one key (Evaluator): all-or-nothing", () => {
  const arb = limitsWithTraffic(anySpecArb, 3, (windowMs) => opsArb(windowMs, 40, true));

  it("allowed iff every limit's model allows; a denial charges nothing; the decision reports the most restrictive limit truthfully", () => {
    fc.assert(
      fc.property(arb, ([specs, t0, ops]) => {
        const limits = resolveLimits(specs);
        const ev = new Evaluator(limits);
        const states: LimitState[] = ev.init();
        const history = new History();
        const maxCost = Math.min(...limits.map((l) => l.capacity));
        let t = t0;
        for (const op of ops) {
          t += op.dt;
          const c = Math.min(op.c, maxCost);
          if (op.kind === "refund") {
            ev.refund(states, t, c);
            history.refund(c);
            continue;
          }
          const before = states.map(snapshotOf);
          const d = ev.run(states, t, c, op.kind === "consume");
          const models = limits.map((l) => modelDecide(l, history.reqs, t, c, history.high));
          expect(d.allowed).toBe(models.every((m) => m.allowed));
          // One limit: the decision is that limit's outcome (no per-limit list); several: one entry each.
          if (limits.length === 1) expect(d.limits).toBeUndefined();
          else expect(d.limits?.map((o) => o.allowed)).toEqual(models.map((m) => m.allowed));
          if (!d.allowed || op.kind === "peek") {
            expect(states.map(snapshotOf), "a denial or a peek changed a state").toEqual(before);
          }
          if (d.allowed) {
            expect(d.retryAfterMs).toBe(0);
            expect(d.remaining).toBe(Math.min(...models.map((m) => m.remaining)));
            expect(d.delayMs).toBe(Math.max(...models.map((m) => m.delayMs)));
            if (op.kind === "consume") history.admit(t, c);
          } else {
            expect(d.reason).toBe("limit");
            if (d.limits !== undefined) {
              const denying = d.limits.filter((o) => !o.allowed);
              expect(d.retryAfterMs).toBe(Math.max(...denying.map((o) => o.retryAfterMs)));
              expect(d.limits[d.policy]?.allowed).toBe(false);
            }
            // Truthful over every limit at once, and tight.
            expect(ev.run(states, t + d.retryAfterMs, c, false).allowed).toBe(true);
            expect(ev.run(states, t + d.retryAfterMs - 1, c, false).allowed).toBe(false);
            expect(states.map(snapshotOf)).toEqual(before);
          }
          // After resetAfterMs every limit is back to full: the largest admissible cost passes.
          const reset = ev.run(states, t, c, false).resetAfterMs;
          expect(ev.run(states, t + Math.max(reset, d.resetAfterMs), maxCost, false).allowed).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
  });
});
