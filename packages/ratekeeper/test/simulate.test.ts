/**
 * The simulator (ratekeeper/simulate): its decisions are the library's (RateLimiter over the
 * MemoryStore on a manual clock), its over-admission figure is the brute-force maximum over every
 * rolling window, its retryAfter check catches a lie, and its output is deterministic.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MemoryStore, RateLimiter, RateLimitConfigError, type LimitSpec } from "../src/index.js";
import type { Evaluator } from "../src/core/evaluate.js";
import { RetryTally } from "../src/simulate/retry.js";
import {
  SCENARIOS,
  TrafficBuilder,
  formatTable,
  scenario,
  simulate,
  type AlgorithmChoice,
  type SimulationResult,
  type Traffic,
} from "../src/simulate/index.js";
import { anySpecArb, windowOf } from "./arbitraries.js";

/** The algorithm part of a spec (what `simulate` takes besides the common limit and window). */
function choiceOf(spec: LimitSpec): AlgorithmChoice {
  const { limit: _l, window: _w, name: _n, ...choice } = spec;
  return choice;
}

/** Replays `traffic` through a real RateLimiter on a manual clock; returns what each request got. */
async function throughLimiter(spec: LimitSpec, traffic: Traffic) {
  let now = 0;
  const limiter = new RateLimiter({ ...spec, store: new MemoryStore({ sweepIntervalMs: 0 }), clock: () => now });
  const out: { t: number; key: number; cost: number; allowed: boolean; delayMs: number }[] = [];
  for (let i = 0; i < traffic.timesMs.length; i++) {
    now = traffic.timesMs[i] as number;
    const key = traffic.keyIds[i] as number;
    const cost = traffic.costs ? (traffic.costs[i] as number) : 1;
    const d = await limiter.consume(traffic.keys[key] as string, cost);
    out.push({ t: now, key, cost, allowed: d.allowed, delayMs: d.delayMs });
  }
  return out;
}

/** The most units one key had admitted in any window (t - W, t], by brute force over every admission. */
function bruteWorst(decisions: Awaited<ReturnType<typeof throughLimiter>>, windowMs: number): number {
  const admitted = decisions.filter((d) => d.allowed).map((d) => ({ key: d.key, at: d.t + d.delayMs, cost: d.cost }));
  let worst = 0;
  for (const a of admitted) {
    const sum = admitted.filter((b) => b.key === a.key && b.at > a.at - windowMs && b.at <= a.at).reduce((n, b) => n + b.cost, 0);
    worst = Math.max(worst, sum);
  }
  return worst;
}

const trafficArb = (spec: LimitSpec) => {
  const W = windowOf(spec);
  return fc
    .array(
      fc.record({
        dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: Math.ceil(W / 4) }), fc.integer({ min: 0, max: 2 * W })),
        key: fc.integer({ min: 0, max: 2 }),
        cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 4 })),
      }),
      { minLength: 1, maxLength: 60 },
    )
    .map((steps) => steps);
};

describe("simulate", () => {
  it("decides every request as RateLimiter + MemoryStore does; the worst window is the brute-force maximum; retryAfter is truthful", async () => {
    const arb = anySpecArb.chain((spec) => fc.tuple(fc.constant(spec), trafficArb(spec), fc.integer({ min: 0, max: 1_700_000_000_000 })));
    await fc.assert(
      fc.asyncProperty(arb, async ([spec, steps, t0]) => {
        const b = new TrafficBuilder();
        let t = t0;
        const cap = Math.max(1, Math.min(spec.limit, "capacity" in spec && spec.capacity ? spec.capacity : spec.limit));
        const capOf = spec.algorithm === "gcra" ? (spec.burst ?? 0) + 1 : cap;
        for (const s of steps) b.add((t += s.dt), `k${s.key}`, Math.min(s.cost, capOf));
        const traffic = b.build("prop", "random");
        const r = simulate({ limit: spec.limit, window: spec.window, algorithms: [choiceOf(spec)], traffic, bins: 7 });
        const real = await throughLimiter(spec, traffic);
        const a = r.algorithms[0]!;
        expect(a.admitted).toBe(real.filter((d) => d.allowed).length);
        expect(a.denied).toBe(real.filter((d) => !d.allowed).length);
        expect(a.worstInWindow.units).toBe(bruteWorst(real, windowOf(spec)));
        expect(a.retry.truthful).toBe(a.retry.denials);
        expect(a.retry.denials).toBe(a.denied);
        expect(a.series.admitted.reduce((x, y) => x + y, 0)).toBe(real.filter((d) => d.allowed).reduce((n, d) => n + d.cost, 0));
        expect(Math.max(0, ...a.series.worstInWindow)).toBe(a.worstInWindow.units);
      }),
      { numRuns: 150 },
    );
  });

  it("equals the limiter over many keys and more requests than one sweep of idle keys (idle states are dropped and recreated)", async () => {
    const b = new TrafficBuilder();
    // 70k requests over 5k keys, each key idle long enough between bursts for its state to expire.
    for (let i = 0; i < 70_000; i++) b.add(1_000_000 + i * 7, `k${(i * 7919) % 5000}`);
    const traffic = b.build("keys", "many keys");
    for (const spec of [
      { algorithm: "sliding-log", limit: 3, window: 20_000 },
      { algorithm: "leaky-bucket", mode: "shape", limit: 2, window: 30_000 },
    ] as LimitSpec[]) {
      const r = simulate({ limit: spec.limit, window: spec.window, algorithms: [choiceOf(spec)], traffic });
      const real = await throughLimiter(spec, traffic);
      expect(r.algorithms[0]!.admitted, spec.algorithm).toBe(real.filter((d) => d.allowed).length);
      expect(r.algorithms[0]!.worstInWindow.units, spec.algorithm).toBe(bruteWorstFast(real, windowOf(spec)));
    }
  });

  it("the boundary scenario: a clock-aligned fixed window admits 2x the limit in one rolling window; the log never more than the limit", () => {
    const limit = 50;
    const r = simulate({ limit, window: "10s", traffic: scenario("boundary", { limit, windowMs: 10_000 }) });
    const by = byLabel(r);
    expect(by["fixed-window"]!.worstInWindow.units).toBe(2 * limit);
    expect(by["sliding-log"]!.worstInWindow.units).toBe(limit);
    expect(by["leaky-bucket mode=shape"]!.worstInWindow.units).toBeLessThanOrEqual(limit);
    // GCRA with no burst: one request per window / limit, never a burst.
    expect(by["gcra"]!.worstInWindow.units).toBeLessThanOrEqual(limit);
    expect(by["token-bucket"]!.worstInWindow.units).toBeGreaterThan(limit);
  });

  it("follows the busiest key's state: a token bucket starts full and is emptied by a burst", () => {
    const limit = 20;
    const traffic = scenario("bursty", { limit, windowMs: 1000, seed: 3 });
    const r = simulate({ limit, window: 1000, traffic, algorithms: [{ algorithm: "token-bucket" }, { algorithm: "fixed-window" }] });
    const [tb, fw] = r.algorithms;
    expect(r.stateKey).toBe("client");
    expect(tb!.stateLabel).toMatch(/tokens/);
    expect(Math.max(...tb!.series.state)).toBe(limit);
    expect(Math.min(...tb!.series.state)).toBeLessThan(limit);
    expect(fw!.stateLabel).toMatch(/count/);
    expect(Math.max(...fw!.series.state)).toBeLessThanOrEqual(limit);
    expect(Math.max(...fw!.series.state)).toBeGreaterThan(0);
  });

  it("the state band holds the extremes within each bucket: GCRA's one cell is in use right after each admission, empty by the bucket's end", () => {
    // One cell per 600 ms against buckets of 6 s, the bursts' last admission well before a bucket's end.
    const limit = 100;
    const traffic = scenario("boundary", { limit, windowMs: 60_000 });
    const r = simulate({ limit, window: "1m", traffic, algorithms: [{ algorithm: "gcra" }] });
    const s = r.algorithms[0]!.series;
    expect(Math.max(...s.state)).toBe(0);
    expect(Math.max(...s.stateMax)).toBe(1);
    for (let b = 0; b < r.bins; b++) {
      expect(s.stateMin[b]).toBeLessThanOrEqual(s.state[b]!);
      expect(s.stateMax[b]).toBeGreaterThanOrEqual(s.state[b]!);
    }
  });

  it("is deterministic: the same options give the same result; another seed other traffic", () => {
    for (const name of SCENARIOS) {
      const a = scenario(name, { limit: 10, windowMs: 1000, seed: 7 });
      const b = scenario(name, { limit: 10, windowMs: 1000, seed: 7 });
      expect(JSON.stringify(simulate({ limit: 10, window: 1000, traffic: a }))).toBe(
        JSON.stringify(simulate({ limit: 10, window: 1000, traffic: b })),
      );
      if (name !== "boundary")
        expect(Array.from(scenario(name, { limit: 10, windowMs: 1000, seed: 8 }).timesMs)).not.toEqual(Array.from(a.timesMs));
    }
  });

  it("bad options: one error naming every field", () => {
    const traffic = scenario("steady", { limit: 5, windowMs: 1000 });
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(RateLimitConfigError);
        return (e as Error).message;
      }
      throw new Error("did not throw");
    };
    const both = err(() => simulate({ limit: 0, window: "1x" as never, traffic }));
    expect(both).toMatch(/\n {2}limit: must be a positive whole number/);
    expect(both).toMatch(/\n {2}window: must be a positive whole number of milliseconds/);
    expect(both.split("\n")).toHaveLength(3); // said once, not once per algorithm
    expect(err(() => simulate({ limit: 5, window: "1s", traffic, algorithms: [{ algorithm: "nope" } as never] }))).toMatch(
      /algorithms\[0\]\.algorithm: must be one of/,
    );
    expect(err(() => simulate({ limit: 5, window: "1s", traffic, bins: 0, stateKey: "nobody" }))).toMatch(/bins: must be a whole number/);
    expect(err(() => simulate({ limit: 5, window: "1s", traffic, stateKey: "nobody" }))).toMatch(/stateKey: is not a key of the traffic/);
    expect(err(() => simulate({ limit: 5, window: "1s", traffic: {} as Traffic }))).toMatch(/traffic: must be a Traffic/);
    const costly = new TrafficBuilder();
    costly.add(0, "a", 9);
    expect(
      err(() => simulate({ limit: 5, window: "1s", traffic: costly.build("c", "c"), algorithms: [{ algorithm: "gcra", burst: 2 }] })),
    ).toMatch(/algorithms\[0\]: gcra can never admit a cost above 3/);
    expect(err(() => scenario("nope" as never, { limit: 5, windowMs: 1000 }))).toMatch(/scenario: must be one of steady/);
    expect(err(() => scenario("steady", { limit: 5, windowMs: 0, requests: -1 }))).toMatch(/windowMs[\s\S]*requests/);
    expect(err(() => scenario("heavy-hitter", { limit: 1000, windowMs: 1, durationMs: 10_000_000 }))).toMatch(
      /durationMs: would generate about/,
    );
  });

  it("heavy-hitter lists only the keys that sent requests: many clients with few requests stay cheap", () => {
    // 10 million clients and about 10 requests: before, every client's key was made up front
    // (10 million strings), and simulate sized each algorithm's per-key state for all of them
    // (over a minute and 1.6 GB for `ratekeeper simulate --keys 10000000 --requests 10`).
    const t0 = performance.now();
    // (The shortest traffic is 1 ms: here about 5,000 requests.)
    const traffic = scenario("heavy-hitter", { limit: 100, windowMs: 60_000, keys: 10_000_000, requests: 10 });
    expect(traffic.timesMs.length).toBeLessThan(10_000);
    // Every key listed sent a request ("hot", listed first, may not have in so short a time), in
    // order of first appearance as Traffic.keys says.
    const users = [...new Set(traffic.keyIds)].filter((k) => k !== 0);
    expect(traffic.keys.length).toBe(users.length + 1);
    expect(users).toEqual(users.map((_, i) => i + 1));
    const r = simulate({ limit: 100, window: "1m", traffic });
    expect(r.traffic.keys).toBeLessThanOrEqual(traffic.timesMs.length + 1);
    expect(performance.now() - t0).toBeLessThan(5_000);
    // The default run: every one of the 100 keys sends, the hot one most.
    const full = scenario("heavy-hitter", { limit: 100, windowMs: 60_000 });
    expect(full.keys.length).toBe(100);
    expect(simulate({ limit: 100, window: "1m", traffic: full }).stateKey).toBe("hot");
  });

  it("the terminal table names every algorithm with its admitted count and worst window", () => {
    const r = simulate({ limit: 10, window: "1s", traffic: scenario("boundary", { limit: 10, windowMs: 1000 }) });
    const text = formatTable(r);
    for (const a of r.algorithms) expect(text).toContain(a.label);
    expect(text).toMatch(/fixed-window\s+\d+ \(100%\)\s+0\s+20 at/);
  });
});

describe("RetryTally", () => {
  // A stand-in evaluator that admits from t = 1000 on, whatever the state.
  const from1000 = { run1: (_s: unknown, t: number) => ({ allowed: t >= 1000 }) } as unknown as Evaluator;
  const st = { a: 0, b: 0, ring: null };

  it("counts a retryAfter that was too short as untruthful, and finds the real wait", () => {
    const tally = new RetryTally(from1000, 10, 0, 1_000_000);
    tally.denied(st, 100, 1, 500); // real wait 900
    const s = tally.summary();
    expect(s).toMatchObject({ denials: 1, truthful: 0, exact: 0, maxShortMs: 400 });
    expect(s.samples).toEqual([{ atMs: 100, givenMs: 500, realMs: 900 }]);
  });

  it("counts an exact retryAfter, and measures an overstated one", () => {
    const tally = new RetryTally(from1000, 10, 0, 1_000_000);
    tally.denied(st, 100, 1, 900);
    tally.denied(st, 200, 1, 1300); // real wait 800
    expect(tally.summary()).toMatchObject({ denials: 2, truthful: 2, exact: 1, maxOverMs: 500, medianGivenMs: 900, maxGivenMs: 1300 });
  });

  it("keeps a bounded, evenly spread sample of denials", () => {
    const tally = new RetryTally(from1000, 8, 0, 1_000_000);
    for (let i = 0; i < 1000; i++) tally.denied(st, i, 1, 1000 - i);
    const s = tally.summary().samples;
    expect(s.length).toBeGreaterThanOrEqual(8);
    expect(s.length).toBeLessThan(16);
    const gaps = s.slice(1).map((x, i) => x.atMs - s[i]!.atMs);
    expect(new Set(gaps).size).toBe(1);
  });
});

function byLabel(r: SimulationResult) {
  return Object.fromEntries(r.algorithms.map((a) => [a.label, a]));
}

/** bruteWorst in O(n log n) per key, for the larger test. */
function bruteWorstFast(decisions: Awaited<ReturnType<typeof throughLimiter>>, windowMs: number): number {
  const byKey = new Map<number, { at: number; cost: number }[]>();
  for (const d of decisions)
    if (d.allowed) (byKey.get(d.key) ?? byKey.set(d.key, []).get(d.key)!).push({ at: d.t + d.delayMs, cost: d.cost });
  let worst = 0;
  for (const list of byKey.values()) {
    list.sort((x, y) => x.at - y.at);
    let lo = 0;
    let sum = 0;
    for (let hi = 0; hi < list.length; hi++) {
      sum += list[hi]!.cost;
      // Admissions at the same instant all count: extend hi over ties before measuring.
      while (list[lo]!.at <= list[hi]!.at - windowMs) sum -= list[lo++]!.cost;
      if (hi + 1 < list.length && list[hi + 1]!.at === list[hi]!.at) continue;
      worst = Math.max(worst, sum);
    }
  }
  return worst;
}
