/**
 * A plain-key check (`{key, policy, domain}`, `/v1/auth?key=&policy=&domain=`) is counted under
 * the state key `<domain>|<key>`, and both the domain and the key are the client's. Joined as they
 * are, domain `a|b` with key `c` and domain `a` with key `b|c` would share one counter under the
 * same policy: a caller could spend another's allowance. So a domain holding `|` (or an empty
 * one) is written in a form of its own (service/descriptor-key.ts `stateKey`), and every ordinary
 * domain keeps its state key, unchanged.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { CheckError, DecisionService, parseRules, splitStateKey, stateKey } from "../../src/index.js";
import { DashboardStats } from "../../src/dashboard/stats.js";
import { StateBuilder } from "../../src/dashboard/state.js";
import type { Override, OverrideLookup } from "../../src/overrides/types.js";

const YAML = `
policies:
  one: { algorithm: fixed-window, limit: 1, window: 1m }
domains:
  - domain: d
    descriptors:
      - key: k
        algorithm: fixed-window
        limit: 1
        window: 1m
`;

function service(overrides: Override[] = [], observer?: DashboardStats) {
  const lookup: OverrideLookup = { get: (domain, key) => overrides.find((o) => o.domain === domain && o.key === key) };
  return new DecisionService({
    store: new MemoryStore(),
    rules: parseRules(YAML, "r.yaml"),
    overrides: lookup,
    clock: () => 1e6,
    injectClock: true,
    observer,
  });
}

const plain = (domain: string | undefined, key: string) => ({ domain, key, policy: "one" });

describe("plain-key checks: the domain and the key cannot be shifted into each other", () => {
  it("domain a|b with key c does not spend domain a's key b|c", async () => {
    const svc = service();
    expect((await svc.decide(plain("a|b", "c"))).allowed).toBe(true);
    expect((await svc.decide(plain("a", "b|c"))).allowed).toBe(true);
    expect((await svc.decide(plain("a|b", "c"))).allowed).toBe(false); // each its own 1 a minute
    expect((await svc.decide(plain("a", "b|c"))).allowed).toBe(false);
  });

  it("an empty domain (/v1/auth's ?domain=) cannot meet a quoted one", async () => {
    const svc = service();
    expect((await svc.decide(plain("a|b", "c"))).allowed).toBe(true);
    for (const key of ["3|a|b|c", "a|b|c", '["a|b","c"]']) expect((await svc.decide(plain("", key))).allowed, key).toBe(true);
  });

  it("ordinary domains keep their state keys", async () => {
    const svc = service();
    expect((await svc.decide(plain("web", "user|42"))).allowed).toBe(true);
    const np = svc.rules.policies.get("one")!;
    // The counter is where it always was: `<domain>|<key>`.
    expect((await svc.limiterFor(np.policyId, np.specs).peek("web|user|42")).allowed).toBe(false);
    expect((await svc.decide(plain(undefined, "k"))).allowed).toBe(true); // the domain defaults to the policy's name
    expect((await svc.limiterFor(np.policyId, np.specs).peek("one|k")).allowed).toBe(false);
  });

  it("overrides with limits of their own: a domain holding | does not share the descriptor's counter", async () => {
    const limits = { limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }] } as Override["policy"];
    const svc = service([
      { domain: "a|k=1", key: "k=2", policy: limits },
      { domain: "a", key: "k=1|k=2", policy: limits },
    ]);
    const entries = (...values: string[]) => values.map((value) => ({ key: "k", value }));
    expect((await svc.decide({ domain: "a|k=1", descriptors: [entries("2")] })).allowed).toBe(true);
    expect((await svc.decide({ domain: "a", descriptors: [entries("1", "2")] })).allowed).toBe(true);
  });

  it("the dashboard's top denied keys name the domain and key as sent", async () => {
    const stats = new DashboardStats(0);
    const svc = service([], stats);
    for (let i = 0; i < 2; i++) await svc.decide(plain("a|b", "c"));
    for (let i = 0; i < 2; i++) await svc.decide(plain("x", "y|z"));
    const state = await new StateBuilder({
      stats,
      rules: () => svc.rules,
      storeHealth: () => ({ kind: "memory", status: "ready", breaker: null }),
      clock: () => 1e6,
    }).build();
    const keys = state.topDenied.keys.map((k) => [k.domain, k.key]);
    expect(keys).toEqual(
      expect.arrayContaining([
        ["a|b", "c"],
        ["x", "y|z"],
      ]),
    );
  });
});

describe("plain-key checks: the domain's bounds", () => {
  it("a domain longer than 256 characters is a 400 naming the domain (as for descriptors), not the state key", async () => {
    const svc = service();
    for (const n of [257, 600, 100_000]) {
      const e = await svc.decide(plain("x".repeat(n), "k")).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e, `${n}`).toBeInstanceOf(CheckError);
      expect((e as Error).message).toBe(`domain: at most 256 characters (got ${n})`);
    }
    expect((await svc.decide(plain("x".repeat(256), "k".repeat(512)))).allowed).toBe(true);
  });
});

describe("stateKey", () => {
  it("property: reads back as its domain and key, so no two pairs share one; ordinary domains keep the plain join", () => {
    const text = (min: number) => fc.string({ unit: fc.constantFrom("a", "1", "|", "=", "["), minLength: min, maxLength: 6 });
    fc.assert(
      fc.property(text(0), text(0), text(0), text(0), (d1, k1, d2, k2) => {
        expect(splitStateKey(stateKey(d1, k1))).toEqual({ domain: d1, key: k1 });
        if (stateKey(d1, k1) === stateKey(d2, k2)) expect([d1, k1]).toEqual([d2, k2]);
        if (d1 !== "" && !d1.includes("|")) expect(stateKey(d1, k1)).toBe(`${d1}|${k1}`);
      }),
      { numRuns: 5000 },
    );
  });
});
