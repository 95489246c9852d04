/**
 * Descriptor values a client chooses (a header Envoy copies into a descriptor, a JSON body's
 * value) may hold `|` and `=`, the characters the canonical descriptor key joins entries with.
 * The canonical key is what counters and overrides are kept under, so it must name one
 * descriptor only: a crafted value must not reach another descriptor's override (a partner's
 * "unlimited") or spend another descriptor's allowance.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, descriptorKey, parseDescriptorKey, parseRules } from "../../src/index.js";
import type { Override, OverrideLookup } from "../../src/overrides/types.js";

// `user` and `user > plan` share a policy (1 per minute), so they share one limiter.
const YAML = `
domains:
  - domain: d
    descriptors:
      - key: user
        algorithm: fixed-window
        limit: 1
        window: 1m
        descriptors:
          - key: plan
            algorithm: fixed-window
            limit: 1
            window: 1m
`;

function service(overrides: Map<string, Override>) {
  const lookup: OverrideLookup = { get: (domain, key) => overrides.get(`${domain}/${key}`) };
  return new DecisionService({
    store: new MemoryStore(),
    rules: parseRules(YAML, "r.yaml"),
    overrides: lookup,
    clock: () => 1e6,
    injectClock: true,
  });
}
const user = (value: string) => [{ key: "user", value }];

describe("descriptor values holding the key's separators", () => {
  it("a value cannot take the override of a descriptor with more entries", async () => {
    const svc = service(new Map([["d/user=alice|plan=gold", { domain: "d", key: "user=alice|plan=gold", policy: "unlimited" as const }]]));
    const crafted = [];
    for (let i = 0; i < 3; i++) crafted.push((await svc.decide({ domain: "d", descriptors: [user("alice|plan=gold")] })).allowed);
    expect(crafted).toEqual([true, false, false]); // the rule's 1 per minute, not the override's unlimited
    const real = [];
    for (let i = 0; i < 3; i++)
      real.push((await svc.decide({ domain: "d", descriptors: [[...user("alice"), { key: "plan", value: "gold" }]] })).allowed);
    expect(real).toEqual([true, true, true]);
  });

  it("a value cannot spend the allowance of another descriptor", async () => {
    const svc = service(new Map());
    expect((await svc.decide({ domain: "d", descriptors: [user("bob|plan=free")] })).allowed).toBe(true);
    // bob on the free plan has not been charged yet.
    expect((await svc.decide({ domain: "d", descriptors: [[...user("bob"), { key: "plan", value: "free" }]] })).allowed).toBe(true);
  });

  it("distinct descriptors have distinct keys; plain ones keep theirs", () => {
    const e = (...kv: string[]) => kv.map((s) => ({ key: s.split(":")[0]!, value: s.slice(s.indexOf(":") + 1) }));
    const keys = [
      e("a:1|b=2"),
      e("a:1", "b:2"),
      e("a:1\\", "b:2"),
      e("a:1\\|b=2"),
      e("a:1\\\\|b=2"),
      e("a:x=y"),
      e("a=x:y"),
      [{ key: "a|b", value: "1" }],
      e("a:b|1"),
    ].map(descriptorKey);
    expect(new Set(keys).size).toBe(keys.length);
    expect(descriptorKey(e("remote_address:1.2.3.4", "path:/api/x=1"))).toBe("remote_address=1.2.3.4|path=/api/x=1");
  });

  it("property: every descriptor's key reads back as that descriptor, so no two share one", () => {
    const text = (min: number) => fc.string({ unit: fc.constantFrom("a", "b", "|", "=", "\\", "[", '"'), minLength: min, maxLength: 5 });
    const descriptor = fc.array(fc.record({ key: text(1), value: text(0) }), { minLength: 1, maxLength: 3 });
    fc.assert(
      fc.property(descriptor, descriptor, (x, y) => {
        // The text form takes no empty value (gRPC may send one: it is still keyed apart).
        if (x.every((e) => e.value !== "")) expect(parseDescriptorKey(descriptorKey(x))).toEqual(x);
        if (descriptorKey(x) === descriptorKey(y)) expect(x).toEqual(y);
      }),
      { numRuns: 3000 },
    );
  });

  it("the quoted form reads back (GET /v1/keys, the admin API); a plain text keeps its meaning", () => {
    const crafted = [{ key: "user", value: "alice|plan=gold" }];
    expect(descriptorKey(crafted)).toBe('|[["user","alice|plan=gold"]]');
    expect(parseDescriptorKey(descriptorKey(crafted))).toEqual(crafted);
    expect(parseDescriptorKey("user=alice|plan=gold")).toEqual([
      { key: "user", value: "alice" },
      { key: "plan", value: "gold" },
    ]);
    for (const bad of ["|", "|[]", '|[["k"]]', '|[["","v"]]', "|{}", '|[["k",1]]']) expect(parseDescriptorKey(bad), bad).toBeUndefined();
  });
});
