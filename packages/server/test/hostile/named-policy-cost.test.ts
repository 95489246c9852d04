/**
 * A named policy (`policies.<name>`, for plain-key checks) whose `cost` is more than it could
 * ever admit is a mistake of the rules file, refused when it is loaded, as a rule's is
 * (`domains[..].cost: must be at most N, the most this policy could ever admit`). Before, the
 * file loaded, and every plain-key check on that policy was answered 400 ("cost: 10 is more than
 * rule policy:p could ever admit"), blaming each client for the operator's file; a reload to
 * such a file was taken, so a policy that worked stopped admitting anyone.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore, resolveLimits } from "ratekeeper";
import { DecisionService, parseRules, RulesError } from "../../src/index.js";

const DOMAIN = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n";

/** The lines of the RulesError that `text` raises, without their line:column; [] when it loads. */
function problems(text: string): string[] {
  try {
    parseRules(text, "rules.yaml");
    return [];
  } catch (e) {
    expect(e).toBeInstanceOf(RulesError);
    return (e as Error).message.split("\n").map((l) => l.replace(/^rules\.yaml:\d+:\d+:/, "rules.yaml:"));
  }
}

describe("a named policy whose cost no request could ever be admitted at", () => {
  it("is refused when the rules load, naming the policy's cost and its capacity", () => {
    expect(problems(`${DOMAIN}policies:\n  p: { algorithm: fixed-window, limit: 5, window: 1s, cost: 10 }\n`)).toContain(
      "rules.yaml: policies.p.cost: must be at most 5, the most this policy could ever admit (got 10)",
    );
    // Several limits: the smallest capacity (a GCRA burst) is the bound.
    const limits = "limits: [{ algorithm: fixed-window, limit: 100, window: 1h }, { algorithm: gcra, limit: 2, window: 1s, burst: 4 }]";
    const capacity = Math.min(
      ...resolveLimits([
        { algorithm: "fixed-window", limit: 100, window: "1h" },
        { algorithm: "gcra", limit: 2, window: "1s", burst: 4 },
      ]).map((l) => l.capacity),
    );
    expect(problems(`${DOMAIN}policies:\n  q:\n    ${limits}\n    cost: ${capacity + 1}\n`)).toContain(
      `rules.yaml: policies.q.cost: must be at most ${capacity}, the most this policy could ever admit (got ${capacity + 1})`,
    );
    expect(problems(`${DOMAIN}policies:\n  q:\n    ${limits}\n    cost: ${capacity}\n`)).toEqual([]);
  });

  it("a cost the policy can admit loads, and a plain-key check on it is decided", async () => {
    const rules = parseRules(`${DOMAIN}policies:\n  p: { algorithm: fixed-window, limit: 5, window: 1s, cost: 5 }\n`, "rules.yaml");
    const service = new DecisionService({ store: new MemoryStore(), rules });
    const first = await service.decide({ domain: "d", key: "user", policy: "p" });
    expect(first.allowed).toBe(true);
    const second = await service.decide({ domain: "d", key: "user", policy: "p" });
    expect(second.allowed).toBe(false);
  });
});
