/**
 * What one poll of `/dashboard/api/state` may cost the service. The state holds every rule's
 * counts and 60 s of history: with a large rules file it is megabytes of JSON, and the dashboard
 * is open to anyone when no admin token is set. So concurrent polls share one build, and a
 * state that was expensive to build is served again for a while (20x its build time, at most a
 * second) instead of being rebuilt per request: building the state takes at most ~5% of a core
 * however fast it is polled. A state that is cheap to build is built fresh for every poll.
 */
import { describe, expect, it } from "vitest";
import { DashboardStats } from "../src/dashboard/stats.js";
import { StateBuilder } from "../src/dashboard/state.js";
import type { Rules } from "../src/config/rules.js";
import { serveRules } from "./in-process.js";

/** Sources whose rules() call is counted (one per build) and whose clock moves `buildMs` per build. */
function sources(buildMs: number) {
  const clock = { now: 1_000_000 };
  const counted = { builds: 0 };
  const rules = { source: "test", domains: new Map(), rules: [], policies: new Map() } as unknown as Rules;
  const src = {
    stats: new DashboardStats(0),
    rules: () => {
      counted.builds++;
      clock.now += buildMs; // the build "takes" this long on the injected clock
      return rules;
    },
    storeHealth: () => ({ kind: "memory", status: "ready", breaker: null }),
    clock: () => clock.now,
  };
  return { src, clock, counted };
}

describe("dashboard state: what polling costs", () => {
  it("concurrent polls share one build", async () => {
    const { src, counted } = sources(0);
    const b = new StateBuilder(src);
    const all = await Promise.all(Array.from({ length: 50 }, () => b.json()));
    expect(counted.builds).toBe(1);
    expect(new Set(all).size).toBe(1);
  });

  it("an expensive state is served again for 20x its build time (at most 1 s), then rebuilt", async () => {
    const { src, clock, counted } = sources(40); // 40 ms a build: reused for 800 ms
    const b = new StateBuilder(src);
    await b.json();
    for (let i = 0; i < 7; i++) {
      clock.now += 100;
      await b.json();
    }
    expect(counted.builds).toBe(1); // 700 ms after: still the same state
    clock.now += 150;
    await b.json();
    expect(counted.builds).toBe(2);
    const slow = sources(500); // 500 ms a build: capped at 1 s
    const s = new StateBuilder(slow.src);
    await s.json();
    slow.clock.now += 1001;
    await s.json();
    expect(slow.counted.builds).toBe(2);
  });

  it("a cheap state is built fresh for every poll (a check is seen by the next poll)", async () => {
    const { src, clock, counted } = sources(0);
    const b = new StateBuilder(src);
    for (let i = 0; i < 5; i++) {
      clock.now += 1;
      await b.json();
    }
    expect(counted.builds).toBe(5);
  });

  it("the JSON answers carry nosniff, like the page's files", async () => {
    const svc = await serveRules("domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n", {
      dashboard: true,
    });
    try {
      const base = `http://127.0.0.1:${svc.httpPort}`;
      const state = await fetch(`${base}/dashboard/api/state`);
      expect(state.headers.get("x-content-type-options")).toBe("nosniff");
      expect((await state.json()) as { version: number }).toMatchObject({ version: 1 });
      const head = await fetch(`${base}/dashboard/api/events`, { method: "HEAD" });
      expect(head.headers.get("x-content-type-options")).toBe("nosniff");
    } finally {
      await svc.close();
    }
  });
});
