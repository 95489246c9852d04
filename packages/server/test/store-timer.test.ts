/**
 * The store-latency timer (src/service/store-call.ts): every store call is reported, but with the
 * in-memory store and an observer that takes `storeLatencyAgain`, only about one call in 64 is
 * timed (two clock reads were most of the observers' cost per decision); any other store, or an
 * observer without it, has every call timed; with no observer the clock is never read. Counts
 * only: no timings.
 */
import { MemoryStore, type Store } from "ratekeeper";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DecisionService, parseRules } from "../src/index.js";
import { Metrics } from "../src/metrics.js";
import { DashboardStats, TeeObserver } from "../src/dashboard/stats.js";
import type { DecisionObserver } from "../src/service/types.js";

const YAML = `
domains:
  - domain: d
    descriptors:
      - key: k
        algorithm: fixed-window
        limit: 1000000
        window: 1m
`;

const N = 20_000;

/** An observer counting what it is told about store latency. */
function counting(again: boolean): DecisionObserver & { timed: number; untimed: number } {
  const o = {
    timed: 0,
    untimed: 0,
    decision() {},
    storeLatency() {
      o.timed++;
    },
    storeError() {},
    ...(again
      ? {
          storeLatencyAgain() {
            o.untimed++;
          },
        }
      : {}),
  };
  return o;
}

/** A store the service cannot tell is the in-memory one: a wrapper, as any other store is. */
function elsewhere(): Store {
  const inner = new MemoryStore();
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === "function" ? (...args: unknown[]) => (v as (...a: unknown[]) => unknown).apply(target, args) : v;
    },
    getPrototypeOf: () => Object.prototype,
  });
}

async function run(store: Store, observer: DecisionObserver | undefined): Promise<void> {
  const svc = new DecisionService({ store, rules: parseRules(YAML, "r.yaml"), observer });
  for (let i = 0; i < N; i++) {
    const r = svc.decideNow({ domain: "d", descriptors: [[{ key: "k", value: String(i % 100) }]] });
    if (r instanceof Promise) await r;
  }
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the store-latency timer", () => {
  it("with the in-memory store, reports every call and times about one in 64", async () => {
    const clock = vi.spyOn(performance, "now");
    const o = counting(true);
    await run(new MemoryStore(), o);
    expect(o.timed + o.untimed).toBe(N);
    // Random gaps of 1 to 128 calls: about N / 64.5 timed.
    expect(o.timed).toBeGreaterThan(N / 100);
    expect(o.timed).toBeLessThan(N / 40);
    expect(clock).toHaveBeenCalledTimes(2 * o.timed);
  });

  it("times every call for an observer without storeLatencyAgain", async () => {
    const o = counting(false);
    await run(new MemoryStore(), o);
    expect(o.timed).toBe(N);
  });

  it("times every call of any other store", async () => {
    const o = counting(true);
    await run(elsewhere(), o);
    expect(o.timed).toBe(N);
    expect(o.untimed).toBe(0);
  });

  it("never reads the clock without an observer", async () => {
    const clock = vi.spyOn(performance, "now");
    await run(new MemoryStore(), undefined);
    expect(clock).not.toHaveBeenCalled();
  });

  it("counts every call in the metrics' store-latency histogram, through the dashboard's tee", async () => {
    const m = new Metrics();
    const stats = new DashboardStats();
    await run(new MemoryStore(), new TeeObserver(m, stats));
    const text = await m.registry.metrics();
    expect(text).toContain(`ratekeeper_store_latency_seconds_count ${N}\n`);
    expect(text).toContain(`ratekeeper_decisions_total{domain="d",rule="d/k",outcome="ok"} ${N}\n`);
    // The dashboard is given the last timed latency for each untimed call: its ring is full.
    expect(stats.latencyMs()?.samples).toBe(1024);
  });

  it("counts every call after a first store call that threw, before any latency was timed", async () => {
    const m = new Metrics();
    const svc = new DecisionService({ store: new MemoryStore(), rules: parseRules(YAML, "r.yaml"), observer: m });
    // A lone surrogate in the state key: the store throws (the caller's CheckError). The gap of
    // untimed calls was drawn before that call, and they had no latency to repeat.
    await expect(async () => svc.decideNow({ domain: "d", descriptors: [[{ key: "k", value: "\ud800" }]] })).rejects.toThrow(/surrogate/);
    for (let i = 0; i < 200; i++) await svc.decideNow({ domain: "d", descriptors: [[{ key: "k", value: String(i) }]] });
    const text = await m.registry.getSingleMetricAsString("ratekeeper_store_latency_seconds");
    expect(/_count (\d+)/.exec(text)?.[1]).toBe("200");
  });
});
