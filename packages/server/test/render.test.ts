/**
 * The check result's JSON, written by hand (transport/render.ts, with the explanation's parts
 * built once per rule in service/explain.ts), against `JSON.stringify` of the same result: the
 * same text and the same UTF-8 byte count, for generated statuses of every kind, with names
 * that need escaping (quotes, backslashes, controls, non-ASCII, lone and paired surrogates).
 */
import fc from "fast-check";
import type { Decision, DecisionReason, ResolvedLimit } from "ratekeeper";
import { MemoryStore } from "ratekeeper";
import { describe, expect, it } from "vitest";
import { parseRules } from "../src/config/load.js";
import { DecisionService } from "../src/service/decide.js";
import { DecisionExplain, explainParts, type Matched } from "../src/service/explain.js";
import { decidedStatus, unlimitedStatus } from "../src/service/status.js";
import type { CheckResult, DescriptorStatus } from "../src/service/types.js";
import { resultBody, resultJson } from "../src/transport/render.js";

/** Strings mostly plain, sometimes with characters JSON escapes or writes in several bytes. */
const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "grapheme", maxLength: 6 }),
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.constantFrom('a"b', "a\\b", "tab\there", "\u0000", "\u001f", "é", "限", "😀", "\ud83d", "\ude00", "x\ud83d", "\ude00x", "\u2028"),
);
const int = fc.oneof(fc.nat({ max: 120_000 }), fc.constant(0), fc.integer());
const reason = fc.constantFrom<DecisionReason | undefined>(
  undefined,
  "limit",
  "denial-cache",
  "overloaded",
  "degraded",
  "store-error",
  "insurance",
);

const limits = fc.array(
  fc.record({ algorithm: fc.constantFrom("fixed-window", "sliding-window", "gcra"), limit: fc.nat(), windowMs: fc.nat(), name: text }),
  { minLength: 1, maxLength: 3 },
);

const decided = fc
  .record({
    key: text,
    rule: fc.oneof(
      text,
      text.map((t) => `policy:${t}`),
    ),
    matched: fc.oneof<fc.Arbitrary<Matched>[]>(text, fc.array(text, { maxLength: 3 })),
    limits,
    allowed: fc.boolean(),
    shadow: fc.boolean(),
    cost: int,
    n: fc.record({ remaining: int, retryAfterMs: int, resetAfterMs: int, delayMs: int, windowMs: int, limit: int }),
    pick: fc.nat(),
    reason,
  })
  .map((g): DescriptorStatus => {
    const lims = g.limits as unknown as ResolvedLimit[];
    const d = { ...g.n, allowed: g.allowed, reason: g.reason, policy: 0, policyName: lims[g.pick % lims.length]!.name } as Decision;
    const explain = new DecisionExplain({}, g.rule, g.matched, lims, d, g.cost, g.shadow);
    return decidedStatus(g.key, d, d.allowed || g.shadow, g.shadow, explain, lims, g.cost);
  });

const other = fc
  .record({ key: text, rule: fc.option(text), source: fc.constantFrom("rule", "override", "none"), why: text, shadow: fc.boolean() })
  .map((g) => unlimitedStatus(g.key, { rule: g.rule, source: g.source, why: g.why }, g.shadow));

const result = fc
  .record({ domain: text, statuses: fc.array(fc.oneof(decided, other), { minLength: 1, maxLength: 4 }) })
  .map((g): CheckResult => ({ allowed: g.statuses.every((s) => s.allowed), ...g }));

describe("resultJson", () => {
  it("writes what JSON.stringify writes, and counts its bytes", () => {
    fc.assert(
      fc.property(result, (r) => {
        const expected = JSON.stringify(r);
        expect(resultJson(r)).toBe(expected);
        const body = resultBody(r);
        expect(body.text).toBe(expected);
        expect(body.bytes).toBe(Buffer.byteLength(expected));
      }),
      { numRuns: 5000 },
    );
  });

  it("explanations of one rule share their parts, and are rebuilt when the rule id, path or limits differ", () => {
    const owner = {};
    const lims = [{ algorithm: "gcra", limit: 1, windowMs: 1000, name: "a" }] as unknown as ResolvedLimit[];
    const p = explainParts(owner, "d/k", ["k"], lims);
    expect(explainParts(owner, "d/k", ["k"], lims)).toBe(p);
    expect(explainParts(owner, "e/k", ["k"], lims).rule).toBe("e/k");
    expect(explainParts(owner, "e/k", ["k", "j"], lims).matched).toEqual(["k", "j"]);
    expect(explainParts(owner, "e/k", ["k", "j"], [...lims]).whyStart).toBe("matched k > j: gcra 1 per 1000 ms; ");
  });

  it("answers a service's decisions under rules with keys and values that need escaping as JSON.stringify does", async () => {
    const rules = parseRules(
      `
policies:
  p: { algorithm: fixed-window, limit: 1, window: 1m }
domains:
  - domain: d
    descriptors:
      - key: "k\\""
        value: "v\\u2028"
        algorithm: sliding-window
        limit: 1
        window: 1m
`,
      "r.yaml",
    );
    const svc = new DecisionService({ store: new MemoryStore(), rules });
    const checks = [
      { domain: "d", descriptors: [[{ key: 'k"', value: "v\u2028" }]] },
      { domain: "d", descriptors: [[{ key: 'k"', value: "other" }]] },
      { key: "ключ\\", policy: "p" },
    ];
    for (let round = 0; round < 3; round++) {
      for (const c of checks) {
        const r = await svc.decide(c);
        // The first and last are decided under their rule and policy; the second matches no rule.
        expect(r.statuses[0]!.explain.source).toBe(c === checks[1] ? "none" : c === checks[2] ? "policy" : "rule");
        expect(resultJson(r)).toBe(JSON.stringify(r));
        expect(resultBody(r).bytes).toBe(Buffer.byteLength(JSON.stringify(r)));
      }
    }
  });
});
