/**
 * What a rules reload does to limit state and to the service's memory: a policy unchanged keeps
 * its counts; a policy changed (another algorithm, limit or window) starts afresh, never reading
 * the old algorithm's state as its own; and the limiters of policies no longer in the rules are
 * let go, so a service reloaded many times (limits tuned by a tool every minute, a reload storm)
 * holds the limiters of the rules in force, not of every policy it ever had (about 2 KB each).
 */
import { MemoryStore } from "ratekeeper";
import { describe, expect, it } from "vitest";
import { parseRules } from "../src/config/load.js";
import { DecisionService } from "../src/service/decide.js";

/** Rules with `user` in domain `d` under `policy` (YAML flow map), plus `n` tenants with limits from `base`. */
function rules(policy: string, n = 0, base = 1): ReturnType<typeof parseRules> {
  let text = `domains:\n  - domain: d\n    descriptors:\n      - { key: user, ${policy} }\n`;
  for (let i = 0; i < n; i++) text += `      - { key: tenant, value: t${i}, algorithm: gcra, limit: ${base + i}, window: 1m }\n`;
  return parseRules(text, "rules.yaml");
}

const check = (svc: DecisionService) =>
  svc.decide({ domain: "d", descriptors: [[{ key: "user", value: "u1" }]] }).then((r) => r.statuses[0]!);

describe("state across reloads", () => {
  it("an unchanged policy keeps its counts; a changed algorithm starts afresh", async () => {
    const fixed = "algorithm: fixed-window, limit: 5, window: 1h";
    const svc = new DecisionService({ store: new MemoryStore(), rules: rules(fixed) });
    for (let i = 0; i < 3; i++) await check(svc);
    svc.setRules(rules(fixed, 3));
    expect((await check(svc)).remaining).toBe(1);
    svc.setRules(rules("algorithm: token-bucket, limit: 5, window: 1h"));
    expect((await check(svc)).remaining).toBe(4);
  });

  it("the limiters of policies gone from the rules are let go; a policy back again finds its counts", async () => {
    const fixed = "algorithm: fixed-window, limit: 5, window: 1h";
    const first = rules(fixed, 50, 1);
    const svc = new DecisionService({ store: new MemoryStore(), rules: first });
    await check(svc);
    await check(svc);
    const tenant = first.rules.find((r) => r.id.endsWith("tenant=t7"))!;
    const before = svc.limiterFor(tenant.policyId, tenant.specs);
    // Reloads with every tenant's limit changed: their old policies are in no rule any more.
    for (let round = 1; round <= 5; round++) svc.setRules(rules(fixed, 50, 1 + round * 100));
    svc.setRules(first);
    expect(svc.limiterFor(tenant.policyId, tenant.specs)).not.toBe(before);
    expect((await check(svc)).remaining).toBe(2);
  });
});
