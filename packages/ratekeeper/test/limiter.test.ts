/**
 * RateLimiter over the MemoryStore, through the public API with a manual clock: it decides exactly
 * as the pure core does (expiry, eviction-free sweeps, peeks, refunds and resets included), its
 * retryAfterMs is truthful end to end, and several limits are all-or-nothing.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Evaluator } from "../src/core/evaluate.js";
import { MemoryStore, RateLimiter, resolveLimits, type Decision, type LimitSpec, type LimitState } from "../src/index.js";
import { anySpecArb, costArb, limitsWithTraffic } from "./arbitraries.js";

interface Step {
  kind: "consume" | "peek" | "refund" | "reset" | "sweep";
  key: number;
  dt: number;
  c: number;
}

const stepsArb = (windowMs: number) =>
  fc.array(
    fc.record({
      kind: fc.constantFrom<Step["kind"]>("consume", "consume", "consume", "consume", "peek", "refund", "reset", "sweep"),
      key: fc.integer({ min: 0, max: 2 }),
      dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: Math.ceil(windowMs / 3) }), fc.integer({ min: 0, max: 3 * windowMs })),
      c: costArb,
    }),
    { minLength: 1, maxLength: 50 },
  );

/** Requests as [time since the previous one, cost]. */
const requestsArb = (windowMs: number) =>
  fc.array(fc.tuple(fc.integer({ min: 0, max: windowMs }), fc.integer({ min: 1, max: 8 })), { minLength: 1, maxLength: 30 });

describe("RateLimiter + MemoryStore = the pure core", () => {
  it("same decisions as the Evaluator run on plain per-key states, for one or several limits", async () => {
    const arb = limitsWithTraffic(anySpecArb, 3, stepsArb);
    await fc.assert(
      fc.asyncProperty(arb, async ([specs, t0, steps]) => {
        let now = t0;
        const store = new MemoryStore({ sweepIntervalMs: 0 });
        const limiter =
          specs.length === 1
            ? new RateLimiter({ ...(specs[0] as LimitSpec), store, clock: () => now })
            : new RateLimiter({ limits: specs, store, clock: () => now });
        const ev = new Evaluator(resolveLimits(specs));
        const states = new Map<string, LimitState[]>();
        const stateOf = (k: string): LimitState[] => {
          let st = states.get(k);
          if (st === undefined) states.set(k, (st = ev.init()));
          return st;
        };
        for (const [i, s] of steps.entries()) {
          now += s.dt;
          const key = `k${s.key}`;
          const c = Math.min(s.c, limiter.maxCost);
          switch (s.kind) {
            case "consume":
            case "peek": {
              const got: Decision = s.kind === "consume" ? await limiter.consume(key, c) : await limiter.peek(key, c);
              const want = ev.run(stateOf(key), now, c, s.kind === "consume");
              expect(got, `step ${i}: ${s.kind} ${key} cost ${c}`).toEqual(want);
              break;
            }
            case "refund":
              await limiter.refund(key, c);
              ev.refund(stateOf(key), now, c);
              break;
            case "reset":
              await limiter.reset(key);
              states.delete(key);
              break;
            case "sweep":
              store.sweep(now); // drops only keys that are as good as new: decisions must not change
              break;
          }
        }
      }),
      { numRuns: 250 },
    );
  });
});

describe("RateLimiter: end to end", () => {
  it("waiting exactly retryAfterMs and retrying the same cost succeeds (every algorithm, several limits)", async () => {
    const arb = limitsWithTraffic(anySpecArb, 3, requestsArb);
    await fc.assert(
      fc.asyncProperty(arb, async ([specs, t0, reqs]) => {
        let now = t0;
        const limiter = new RateLimiter({ limits: specs, clock: () => now, store: new MemoryStore({ sweepIntervalMs: 0 }) });
        for (const [dt, cost] of reqs) {
          now += dt;
          const c = Math.min(cost, limiter.maxCost);
          const d = await limiter.consume("k", c);
          if (d.allowed) continue;
          expect(d.reason).toBe("limit");
          now += d.retryAfterMs - 1;
          expect((await limiter.peek("k", c)).allowed).toBe(false);
          now += 1;
          expect((await limiter.consume("k", c)).allowed).toBe(true);
        }
      }),
      { numRuns: 250 },
    );
  });

  it("a denied consume changes nothing: every peek (each cost, now and later) reads the same before and after", async () => {
    const arb = limitsWithTraffic(anySpecArb, 3, requestsArb);
    await fc.assert(
      fc.asyncProperty(arb, async ([specs, t0, reqs]) => {
        let now = t0;
        const limiter = new RateLimiter({ limits: specs, clock: () => now, store: new MemoryStore({ sweepIntervalMs: 0 }) });
        const w = Math.max(...limiter.limits.map((l) => l.windowMs));
        const survey = async (retryAfterMs: number) => {
          const start = now;
          const seen: Decision[] = [];
          for (const dt of [0, 1, retryAfterMs, w, 2 * w]) {
            now = start + dt;
            for (let c = 1; c <= limiter.maxCost; c++) seen.push(await limiter.peek("k", c));
          }
          now = start;
          return seen;
        };
        for (const [dt, cost] of reqs) {
          now += dt;
          const c = Math.min(cost, limiter.maxCost);
          const probe = await limiter.peek("k", c);
          if (probe.allowed) {
            await limiter.consume("k", c);
            continue;
          }
          const before = await survey(probe.retryAfterMs);
          const d = await limiter.consume("k", c);
          expect(d).toEqual(probe); // peek said what consume would do
          expect(await survey(probe.retryAfterMs)).toEqual(before);
        }
      }),
      { numRuns: 200 },
    );
  });

  it("100 per minute and 2 per second: a denial by one limit charges neither; the decision names the limit that denied", async () => {
    let now = 1_700_000_000_000;
    const limiter = new RateLimiter({
      limits: [
        { algorithm: "sliding-window", limit: 100, window: "1m", name: "per-minute" },
        { algorithm: "fixed-window", limit: 2, window: "1s", name: "per-second" },
      ],
      clock: () => now,
    });
    expect((await limiter.consume("u")).allowed).toBe(true);
    const second = await limiter.consume("u");
    expect(second).toMatchObject({ allowed: true, remaining: 0, policyName: "per-second" });
    const third = await limiter.consume("u");
    expect(third).toMatchObject({ allowed: false, reason: "limit", policy: 1, policyName: "per-second", limit: 2, windowMs: 1000 });
    expect(third.limits?.map((l) => [l.name, l.allowed])).toEqual([
      ["per-minute", true],
      ["per-second", false],
    ]);
    expect(third.remaining).toBe(0);
    // The minute limit was not charged for the denied request: it reports 98 units left, not 97.
    expect(third.limits?.[0]?.remaining).toBe(98);
    now += third.retryAfterMs;
    const fourth = await limiter.consume("u");
    expect(fourth.allowed).toBe(true);
    expect(fourth.limits?.[0]?.remaining).toBe(97);
  });

  it("refund gives units back; peek changes nothing; reset forgets", async () => {
    let now = 0;
    const limiter = new RateLimiter({ algorithm: "sliding-log", limit: 3, window: "1m", clock: () => now });
    await limiter.consume("k", 2);
    expect((await limiter.peek("k")).remaining).toBe(0);
    expect((await limiter.peek("k")).remaining).toBe(0);
    await limiter.refund("k", 2);
    expect((await limiter.peek("k", 3)).allowed).toBe(true);
    await limiter.consume("k", 3);
    expect((await limiter.consume("k")).allowed).toBe(false);
    now = 30_000;
    await limiter.reset("k");
    expect((await limiter.consume("k", 3)).allowed).toBe(true);
  });

  it("shape mode: allowed requests carry delayMs, the wait for their turn", async () => {
    const limiter = new RateLimiter({ algorithm: "leaky-bucket", mode: "shape", limit: 5, window: "1s", capacity: 3, clock: () => 0 });
    const delays = [];
    for (let i = 0; i < 4; i++) {
      const d = await limiter.consume("k");
      delays.push(d.allowed ? d.delayMs : "rejected");
    }
    expect(delays).toEqual([0, 200, 400, "rejected"]);
  });

  it("limiters sharing a store never share state, even with the same key", async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const a = new RateLimiter({ algorithm: "fixed-window", limit: 1, window: "1m", store, clock: () => 0 });
    const b = new RateLimiter({ algorithm: "token-bucket", limit: 1, window: "1m", store, clock: () => 0 });
    expect((await a.consume("k")).allowed).toBe(true);
    expect((await b.consume("k")).allowed).toBe(true);
    expect((await a.consume("k")).allowed).toBe(false);
  });

  it("without an injected clock it reads the process clock", async () => {
    const limiter = new RateLimiter({ algorithm: "gcra", limit: 1, window: "1h" });
    const d = await limiter.consume("k");
    expect(d).toMatchObject({ allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, delayMs: 0, reason: undefined });
    const denied = await limiter.consume("k");
    expect(denied.allowed).toBe(false);
    // Some real time may pass between the calls: within one emission interval of 1 h.
    expect(denied.retryAfterMs).toBeGreaterThan(3_500_000);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(3_600_000);
  });
});
