/**
 * A descriptor may carry an empty value (`{ key: "heavy", value: "" }`): the service counts it,
 * and looks its override up, under `heavy=` (service/descriptor-key.ts), and a rule of that key
 * matches it. The admin API's and import's warnings parsed an override's key with
 * parseDescriptorKey, which refuses an empty value, so an override of `heavy=` below its rule's
 * cost got no warning while the service denied every check of it. Each case runs the real service.
 */
import { MemoryStore, type LimitSpec } from "ratekeeper";
import { describe, expect, it } from "vitest";
import { DecisionService, parseRules } from "../../src/index.js";
import type { Override } from "../../src/overrides/types.js";
import { overrideWarnings } from "../../src/transport/override-warnings.js";

const RULES = `
domain: d
descriptors:
  - key: heavy
    cost: 5
    rate_limit: { unit: minute, requests_per_unit: 100 }
    descriptors:
      - key: sub
        cost: 5
        rate_limit: { unit: minute, requests_per_unit: 100 }
`;
const rules = parseRules(RULES, "rules.yaml");
const limits: LimitSpec[] = [{ algorithm: "fixed-window", limit: 3, window: "1m" }];
const warning = (rule: string) =>
  `rule ${rule} costs 5 a request, more than this override could ever admit (at most 3): this key matches that rule, so every check of it is denied, except a check that sends a limit with the descriptor (Envoy's route config), which the override decides at the client's cost alone`;

async function decided(o: Override, entries: { key: string; value: string }[]) {
  const lookup = { get: (domain: string, key: string) => (domain === o.domain && key === o.key ? o : undefined) };
  const service = new DecisionService({ store: new MemoryStore(), rules, overrides: lookup });
  const r = await service.decide({ domain: "d", descriptors: [entries] });
  return [r.allowed, r.statuses[0]?.explain?.source];
}

describe("an override of a key with an empty value, below its rule's cost", () => {
  it("is warned about as any other key", () => {
    expect(overrideWarnings(rules, { domain: "d", key: "heavy=", policy: { limits } })).toEqual([warning("d/heavy")]);
    expect(overrideWarnings(rules, { domain: "d", key: "heavy=|sub=", policy: { limits } })).toEqual([warning("d/heavy/sub")]);
    expect(overrideWarnings(rules, { domain: "d", key: "heavy=a|sub=", policy: { limits } })).toEqual([warning("d/heavy/sub")]);
  });

  it("(the service applies the override to such a descriptor, and denies it)", async () => {
    expect(await decided({ domain: "d", key: "heavy=", policy: { limits } }, [{ key: "heavy", value: "" }])).toEqual([false, "override"]);
    const two = [
      { key: "heavy", value: "" },
      { key: "sub", value: "" },
    ];
    expect(await decided({ domain: "d", key: "heavy=|sub=", policy: { limits } }, two)).toEqual([false, "override"]);
  });

  it("a key that is no descriptor's (no `=`, an empty name) still gets none", () => {
    for (const key of ["heavy", "=a", "heavy=|=b"]) expect(overrideWarnings(rules, { domain: "d", key, policy: { limits } })).toEqual([]);
  });
});
