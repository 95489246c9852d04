/**
 * A plain-key check and a descriptor check meet on one counter when they name the same key in the
 * same domain under the same limits: the state key is `<domain>|<key>` for both (a descriptor's key
 * being its canonical `key=value` text), and the store namespace is the policy's limits (algorithm,
 * limit, window and options; not the limits' names, nor where the policy was written). docs/service.md says so;
 * overrides already take `(domain, key)` as one key for both.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../src/index.js";
import type { Override, OverrideLookup } from "../src/overrides/types.js";

const YAML = `
policies:
  same: { algorithm: fixed-window, limit: 1, window: 1m }
  other: { algorithm: fixed-window, limit: 2, window: 1m }
  named: { limits: [{ name: mine, algorithm: fixed-window, limit: 1, window: 1m }] }
domains:
  - domain: api
    descriptors:
      - key: user_id
        algorithm: fixed-window
        limit: 1
        window: 1m
`;

function service(overrides: Override[] = []) {
  const lookup: OverrideLookup = { get: (domain, key) => overrides.find((o) => o.domain === domain && o.key === key) };
  return new DecisionService({
    store: new MemoryStore(),
    rules: parseRules(YAML, "r.yaml"),
    overrides: lookup,
    clock: () => 1e6,
    injectClock: true,
  });
}

const descriptor = { domain: "api", descriptors: [[{ key: "user_id", value: "42" }]] };
const plain = (policy: string, domain = "api") => ({ domain, key: "user_id=42", policy });

describe("a plain key and a descriptor with the same text, domain and limits share a counter", () => {
  it("the same limits (a named policy equal to the rule's, named alike or not): one counter, either way round", async () => {
    const a = service();
    expect((await a.decide(plain("same"))).allowed).toBe(true);
    expect((await a.decide(descriptor)).allowed).toBe(false);
    const b = service();
    expect((await b.decide(descriptor)).allowed).toBe(true);
    expect((await b.decide(plain("same"))).allowed).toBe(false);
    const c = service();
    expect((await c.decide(plain("named"))).allowed).toBe(true);
    expect((await c.decide(descriptor)).allowed).toBe(false);
  });

  it("other limits, or another domain: counters of their own", async () => {
    for (const [policy, domain] of [
      ["other", "api"],
      ["same", "web"],
    ] as const) {
      const svc = service();
      expect((await svc.decide(plain(policy, domain))).allowed).toBe(true);
      expect((await svc.decide(descriptor)).allowed, `${policy} in ${domain}`).toBe(true);
    }
  });

  it("an override on (api, user_id=42) applies to both, on one counter", async () => {
    const svc = service([
      { domain: "api", key: "user_id=42", policy: { limits: [{ algorithm: "fixed-window", limit: 2, window: "1m" }] } },
    ]);
    expect((await svc.decide(plain("other"))).allowed).toBe(true);
    expect((await svc.decide(descriptor)).allowed).toBe(true);
    expect((await svc.decide(descriptor)).allowed).toBe(false);
    expect((await svc.decide(plain("other"))).allowed).toBe(false);
  });
});
