/**
 * Edge cases of the cheap observers (metrics.ts, decision-counts.ts, envoy-stats.ts,
 * service/store-call.ts) against what plain prom-client told every event would show.
 */
import { MemoryStore } from "ratekeeper";
import { describe, expect, it } from "vitest";
import { DecisionService, parseRules } from "../src/index.js";
import { Metrics } from "../src/metrics.js";

const YAML = `
domains:
  - domain: d
    descriptors:
      - key: k
        algorithm: fixed-window
        limit: 1000000
        window: 1m
`;

describe("the store-latency histogram's count", () => {
  it("counts every call after a first store call that threw (no latency timed yet)", async () => {
    const m = new Metrics();
    const svc = new DecisionService({ store: new MemoryStore(), rules: parseRules(YAML, "r.yaml"), observer: m });
    // A lone surrogate in the state key: the store throws (the caller's CheckError).
    await expect(async () => svc.decideNow({ domain: "d", descriptors: [[{ key: "k", value: "\ud800" }]] })).rejects.toThrow(/surrogate/);
    for (let i = 0; i < 200; i++) await svc.decideNow({ domain: "d", descriptors: [[{ key: "k", value: String(i) }]] });
    const text = await m.registry.getSingleMetricAsString("ratekeeper_store_latency_seconds");
    expect(/_count (\d+)/.exec(text)?.[1]).toBe("200");
  });
});
