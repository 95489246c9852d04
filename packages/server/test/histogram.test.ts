/**
 * FastHistogram (src/histogram.ts) against prom-client's own Histogram: fed the same values, the
 * two expose the same text, through resets and values on, between and past the bounds.
 */
import fc from "fast-check";
import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FastHistogram } from "../src/histogram.js";

const BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

function pair(): { fast: FastHistogram; plain: Histogram; text: () => Promise<[string, string]> } {
  const a = new Registry();
  const b = new Registry();
  const config = { name: "x_seconds", help: "x", buckets: BUCKETS };
  const fast = new FastHistogram({ ...config, registers: [a] });
  const plain = new Histogram({ ...config, registers: [b] });
  return { fast, plain, text: async () => [await a.metrics(), await b.metrics()] };
}

const value = fc.oneof(
  fc.double({ min: 0, max: 0.5, noNaN: true }),
  fc.constantFrom(...BUCKETS, 0, -0, -1, 1e9, 5e-324, Number.MAX_VALUE),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

describe("FastHistogram", () => {
  it("exposes what prom-client's Histogram exposes for the same values", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(value, fc.constant("reset" as const)), { maxLength: 200 }), async (ops) => {
        const { fast, plain, text } = pair();
        for (const op of ops) {
          if (op === "reset") {
            fast.reset();
            plain.reset();
          } else {
            fast.observe(op);
            plain.observe(op);
          }
        }
        const [f, p] = await text();
        expect(f).toBe(p);
        expect(await fast.get()).toEqual(await plain.get());
      }),
      { numRuns: 300 },
    );
  });

  it("refuses what prom-client refuses", () => {
    const { fast, plain } = pair();
    for (const bad of [NaN, Infinity, -Infinity]) {
      expect(() => plain.observe(bad)).toThrow(TypeError);
      expect(() => fast.observe(bad)).toThrow(TypeError);
    }
    expect(() => plain.observe({ l: "v" }, 1)).toThrow();
    expect(() => fast.observe({ l: "v" }, 1)).toThrow();
  });
});

describe("FastHistogram handing its series over to prom-client", () => {
  it("exposes what prom-client's Histogram exposes through zero(), labels {} and refused values", async () => {
    const op = fc.oneof(value, fc.constantFrom("reset" as const, "zero" as const, "labelled" as const, "scrape" as const, "NaN" as const));
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 100 }), async (ops) => {
        const { fast, plain, text } = pair();
        for (const x of ops) {
          if (x === "scrape") {
            const [f, p] = await text();
            expect(f).toBe(p);
          } else if (x === "reset") {
            fast.reset();
            plain.reset();
          } else if (x === "zero") {
            fast.zero({});
            plain.zero({});
          } else if (x === "labelled") {
            fast.observe({}, 0.003);
            plain.observe({}, 0.003);
          } else if (x === "NaN") {
            expect(() => fast.observe(NaN)).toThrow(TypeError);
            expect(() => plain.observe(NaN)).toThrow(TypeError);
          } else {
            fast.observe(x);
            plain.observe(x);
          }
        }
        const [f, p] = await text();
        expect(f).toBe(p);
      }),
      { numRuns: 300 },
    );
  });
});
