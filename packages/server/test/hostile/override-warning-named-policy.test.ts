/**
 * The cost warning for a plain key names the policy its domain names ("if this key is checked with
 * that policy, every check of it is denied"). This runs the real service to show that is what
 * happens: a plain-key check with that policy is decided by the override at the policy's cost, and
 * denied. (A plain-key check may send another domain than its policy's name: the warning covers the
 * policy named like the override's domain only.)
 */
import { MemoryStore, type LimitSpec } from "ratekeeper";
import { describe, expect, it } from "vitest";
import { DecisionService, parseRules } from "../../src/index.js";
import type { Override } from "../../src/overrides/types.js";
import { overrideWarnings } from "../../src/transport/override-warnings.js";

const RULES = `
policies:
  login:
    algorithm: fixed-window
    limit: 100
    window: 1m
    cost: 5
`;
const rules = parseRules(RULES, "rules.yaml");
const limits: LimitSpec[] = [{ algorithm: "fixed-window", limit: 3, window: "1m" }];
const o: Override = { domain: "login", key: "user:42", policy: { limits } };

describe("the cost warning of an override under a named policy", () => {
  it("says a check with that policy is denied", () => {
    expect(overrideWarnings(rules, o)).toEqual([
      "policy login costs 5 a request, more than this override could ever admit (at most 3): if this key is checked with that policy, every check of it is denied",
    ]);
  });

  it("(the service denies it, by the override)", async () => {
    const lookup = { get: (domain: string, key: string) => (domain === o.domain && key === o.key ? o : undefined) };
    const service = new DecisionService({ store: new MemoryStore(), rules, overrides: lookup });
    const r = await service.decide({ key: "user:42", policy: "login" });
    expect([r.allowed, r.statuses[0]?.explain?.source]).toEqual([false, "override"]);
  });
});
