/**
 * An override of a key whose rule shares its counter (`share_threshold`: every value matching the
 * rule's wildcard is counted, and its override looked up, under the pattern, `files=files/*`) is
 * never consulted for a concrete value (`files=files/a.pdf`): the service looks up the pattern's
 * key only (service/decide.ts). The admin API's warning (dc6b824) said of such an override, below
 * the rule's cost, that "this key matches that rule, so every check of it is denied, except a check that sends a limit with the descriptor (Envoy's route config), which the override decides at the client's cost alone": the opposite
 * of what happens (the rule decides, the override is ignored), and an override at or above the
 * cost got no word at all. It now says the override never applies and names the key to write.
 */
import { MemoryStore } from "ratekeeper";
import { describe, expect, it } from "vitest";
import { DecisionService, parseRules } from "../../src/index.js";
import type { Override } from "../../src/overrides/types.js";
import { overrideWarnings } from "../../src/transport/override-warnings.js";

const RULES = `
domain: d
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    cost: 5
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;
const rules = parseRules(RULES, "rules.yaml");
const below: Override["policy"] = { limits: [{ algorithm: "fixed-window", limit: 3, window: "1m" }] };
const above: Override["policy"] = { limits: [{ algorithm: "fixed-window", limit: 50, window: "1m" }] };
const NEVER =
  'rule d/files=files/* shares one counter among the values matching its pattern (share_threshold): a descriptor of this key is counted, and its override looked up, under "files=files/*", so this override never applies to it, except to a check that sends a limit with the descriptor (Envoy\'s route config); write it for that key';

describe("an override of a concrete value under a share_threshold rule", () => {
  it("is said never to apply, naming the pattern's key, whatever its limits (a block too)", () => {
    const ids = rules.rules.map((r) => r.id);
    expect(ids).toEqual(["d/files=files/*"]);
    for (const policy of [below, above, "blocked" as Override["policy"]])
      expect(overrideWarnings(rules, { domain: "d", key: "files=files/a.pdf", policy })).toEqual([NEVER]);
  });

  it("the pattern's own key keeps the cost warning", () => {
    expect(overrideWarnings(rules, { domain: "d", key: "files=files/*", policy: below })).toEqual([
      "rule d/files=files/* costs 5 a request, more than this override could ever admit (at most 3): this key matches that rule, so every check of it is denied, except a check that sends a limit with the descriptor (Envoy's route config), which the override decides at the client's cost alone",
    ]);
    expect(overrideWarnings(rules, { domain: "d", key: "files=files/*", policy: above })).toEqual([]);
  });

  it("(what the warning says is what the service does: the concrete key's override is ignored)", async () => {
    const o: Override = { domain: "d", key: "files=files/a.pdf", policy: "blocked" };
    const lookup = { get: (domain: string, key: string) => (domain === o.domain && key === o.key ? o : undefined) };
    const service = new DecisionService({ store: new MemoryStore(), rules, overrides: lookup });
    const r = await service.decide({ domain: "d", descriptors: [[{ key: "files", value: "files/a.pdf" }]] });
    expect(r.allowed).toBe(true);
    expect(r.statuses[0]?.explain?.source).toBe("rule");
  });
});
