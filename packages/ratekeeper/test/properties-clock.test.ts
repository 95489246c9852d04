/**
 * A clock that steps back (NTP corrections; a Redis failover to a replica whose clock is behind,
 * when the store reads Redis TIME) must not open a hole in the limit. Each algorithm keeps the
 * newest time it has seen in its state and treats an earlier `nowMs` as that time, so the bound
 * still holds when every admitted request is placed at the high-water mark of the clock.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LimitSpec } from "../src/index.js";
import { costArb, specArbs, startArb, windowOf } from "./arbitraries.js";
import { boundViolation, driver } from "./core-models.js";

const stepsArb = (windowMs: number) =>
  fc.array(
    fc.record({
      peek: fc.boolean(),
      dt: fc.oneof(
        { weight: 3, arbitrary: fc.integer({ min: 0, max: windowMs }) },
        { weight: 1, arbitrary: fc.integer({ min: -2 * windowMs, max: -1 }) }, // the clock steps back
        { weight: 1, arbitrary: fc.constant(0) },
      ),
      c: costArb,
    }),
    { minLength: 1, maxLength: 40 },
  );

describe.each(Object.keys(specArbs))("%s with a clock that steps back", (name) => {
  it("never admits more than its bound (requests placed at the clock's high-water mark); answers stay sane", () => {
    const specArb = specArbs[name] as fc.Arbitrary<LimitSpec>;
    fc.assert(
      fc.property(
        specArb.chain((spec) => fc.tuple(fc.constant(spec), startArb, stepsArb(windowOf(spec)))),
        ([spec, t0, steps]) => {
          const d = driver(spec);
          const admitted: Array<{ t: number; c: number }> = [];
          let t = t0 + 3 * windowOf(spec); // room to step back without going below 0
          let high = Number.NEGATIVE_INFINITY;
          for (const s of steps) {
            t = Math.max(0, t + s.dt);
            const c = Math.min(s.c, d.lim.capacity);
            const out = d.check(t, c);
            for (const v of [out.remaining, out.retryAfterMs, out.resetAfterMs, out.delayMs]) {
              expect(Number.isSafeInteger(v) && v >= 0, `not a whole number >= 0: ${v}`).toBe(true);
            }
            expect(out.remaining).toBeLessThanOrEqual(d.lim.capacity);
            if (out.allowed && !s.peek) {
              d.commit(t, c);
              high = Math.max(high, t);
              admitted.push({ t: high, c });
            }
            if (!out.allowed) {
              // Truthful even after a step back: waiting retryAfterMs from this (earlier) reading works.
              expect(d.check(t + out.retryAfterMs, c).allowed).toBe(true);
            }
          }
          expect(boundViolation(d.lim, admitted)).toBeNull();
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("RateLimiter + MemoryStore with a clock that steps back", () => {
  it("expiry (resetAfterMs as the TTL) never forgets units that still count: the bound holds at the high-water mark", async () => {
    const { MemoryStore, RateLimiter } = await import("../src/index.js");
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(...Object.values(specArbs)).chain((spec) => fc.tuple(fc.constant(spec), startArb, stepsArb(windowOf(spec)))),
        async ([spec, t0, steps]) => {
          let now = t0 + 3 * windowOf(spec);
          const store = new MemoryStore({ sweepIntervalMs: 0 });
          const limiter = new RateLimiter({ ...spec, store, clock: () => now });
          const lim = limiter.limits[0];
          if (lim === undefined) throw new Error("no limit");
          const admitted: Array<{ t: number; c: number }> = [];
          let high = Number.NEGATIVE_INFINITY;
          for (const s of steps) {
            now = Math.max(0, now + s.dt);
            const c = Math.min(s.c, limiter.maxCost);
            const d = s.peek ? await limiter.peek("k", c) : await limiter.consume("k", c);
            if (d.allowed && !s.peek) {
              high = Math.max(high, now);
              admitted.push({ t: high, c });
            }
          }
          // (No sweeps here: a sweep reads its own time, and once it has dropped a key whose units
          // had all left the window at that time, nothing can remember them if the clock then
          // steps back; real time has moved on, so that is not a breach.)
          expect(boundViolation(lim, admitted)).toBeNull();
        },
      ),
      { numRuns: 300 },
    );
  });
});
