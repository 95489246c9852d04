/**
 * The admin API's warning for an override whose limits admit less than one request of its rule's
 * cost said that "every check of it is denied". The service (service/decide.ts) does deny a check
 * decided by that rule, but the override also applies, at the client's cost alone (the rule's
 * cost no longer multiplies it), where the rule does not decide: when the rule is replaced by
 * another descriptor of the request (`replaces`), or when Envoy sends a limit with the descriptor
 * (route config). Such checks are admitted. The warning now says so; each case here runs the real
 * service with the override to show the warning's text is what happens. Likewise the warning for
 * the override of a value its share_threshold rule counts under the pattern said it "never
 * applies": it does apply to a descriptor sent with its own limit, which skips the rules.
 */
import { MemoryStore } from "ratekeeper";
import { describe, expect, it } from "vitest";
import { DecisionService, parseRules } from "../../src/index.js";
import type { Override } from "../../src/overrides/types.js";
import { overrideWarnings } from "../../src/transport/override-warnings.js";

const RULES = `
domain: d
descriptors:
  - key: heavy
    cost: 5
    rate_limit: { name: heavy, unit: minute, requests_per_unit: 100 }
  - key: plan
    rate_limit: { unit: minute, requests_per_unit: 100, replaces: [{ name: heavy }] }
`;
const rules = parseRules(RULES, "rules.yaml");
const o: Override = { domain: "d", key: "heavy=a", policy: { limits: [{ algorithm: "fixed-window", limit: 3, window: "1m" }] } };
const heavy = [{ key: "heavy", value: "a" }];

function service(): DecisionService {
  const lookup = { get: (domain: string, key: string) => (domain === o.domain && key === o.key ? o : undefined) };
  return new DecisionService({ store: new MemoryStore(), rules, overrides: lookup });
}

describe("the cost warning of an override below its rule's cost", () => {
  it("says checks decided by the rule are denied, and names the checks the override decides at the client's cost", () => {
    expect(overrideWarnings(rules, o)).toEqual([
      "rule d/heavy costs 5 a request, more than this override could ever admit (at most 3): this key matches that rule, so every check of it is denied, except a check that sends a limit with the descriptor (Envoy's route config) or has another descriptor matching a rule that replaces it (d/plan), which the override decides at the client's cost alone",
    ]);
  });

  it("(the service denies a check the rule decides)", async () => {
    const r = await service().decide({ domain: "d", descriptors: [heavy] });
    expect(r.allowed).toBe(false);
    expect(r.statuses[0]?.explain?.source).toBe("override");
  });

  it("(the service admits a check whose rule is replaced: the override applies at cost 1)", async () => {
    const s = service();
    const got: boolean[] = [];
    for (let i = 0; i < 4; i++)
      got.push((await s.decide({ domain: "d", descriptors: [heavy, [{ key: "plan", value: "p" }]] })).statuses[0]?.allowed === true);
    expect(got).toEqual([true, true, true, false]);
  });

  it("(the service admits a check with a limit sent by Envoy: the override applies at cost 1)", async () => {
    const s = service();
    const limit = { requestsPerUnit: 1000, unitMs: 60_000 };
    const got: boolean[] = [];
    for (let i = 0; i < 4; i++) got.push((await s.decide({ domain: "d", descriptors: [heavy], descriptorLimits: [limit] })).allowed);
    expect(got).toEqual([true, true, true, false]);
  });
});

describe("the warning of an override of a value a share_threshold rule counts under its pattern", () => {
  const shared = parseRules(
    "domain: d\ndescriptors:\n  - key: files\n    value: files/*\n    share_threshold: true\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n",
    "rules.yaml",
  );
  const blocked: Override = { domain: "d", key: "files=files/a.pdf", policy: "blocked" };

  it("says it applies to a check that sends a limit with the descriptor", () => {
    expect(overrideWarnings(shared, blocked)).toEqual([
      'rule d/files=files/* shares one counter among the values matching its pattern (share_threshold): a descriptor of this key is counted, and its override looked up, under "files=files/*", so this override never applies to it, except to a check that sends a limit with the descriptor (Envoy\'s route config); write it for that key',
    ]);
  });

  it("(the service applies it there, and not to a check the rule decides)", async () => {
    const lookup = { get: (domain: string, key: string) => (domain === "d" && key === blocked.key ? blocked : undefined) };
    const s = new DecisionService({ store: new MemoryStore(), rules: shared, overrides: lookup });
    const descriptors = [[{ key: "files", value: "files/a.pdf" }]];
    const ruled = await s.decide({ domain: "d", descriptors });
    expect([ruled.allowed, ruled.statuses[0]?.explain?.source]).toEqual([true, "rule"]);
    const sent = await s.decide({ domain: "d", descriptors, descriptorLimits: [{ requestsPerUnit: 10, unitMs: 60_000 }] });
    expect([sent.allowed, sent.statuses[0]?.explain?.source]).toEqual([false, "override"]);
  });
});
