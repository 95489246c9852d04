/**
 * An override whose stored policy the library refuses (a row edited in the database by hand, or
 * written by a newer version with an algorithm or option this one does not know) is the stored
 * data's fault, never the client's: the key is decided by its rule, as if it had no override
 * (the default keeps limiting, as the service keeps deciding with what it holds when the
 * overrides database fails), and the service logs the row once, naming its domain and key and
 * the library's message, with an error id. Before, every check of that key was answered 400
 * ("override for d/k=a has a bad policy: ..."; gRPC INVALID_ARGUMENT), and nothing was logged.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import type { Override, OverrideLookup } from "../../src/overrides/types.js";
import { captureLog, serveHttp } from "./failing-parts.js";

const RULES = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
`;
const MSG = "override ignored: the library refuses its stored policy; its key is decided by its rule";

/** One override row for `k=a` whose limits name an algorithm this version does not have. */
function overrides(): { lookup: OverrideLookup; rewrite: () => void } {
  const row = (): Override => ({
    domain: "d",
    key: "k=a",
    policy: { limits: [{ algorithm: "quantum-window", limit: 50, window: "1m" } as never] },
  });
  let o = row();
  return { lookup: { get: (domain, key) => (domain === "d" && key === "k=a" ? o : undefined) }, rewrite: () => (o = row()) };
}

let close: (() => void) | undefined;
afterEach(() => close?.());

describe("an override whose stored policy the library refuses", () => {
  it("leaves its key to the rule, and is logged once per row", async () => {
    const { lines, logger } = captureLog();
    const o = overrides();
    const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "rules.yaml"), overrides: o.lookup, logger });
    const s = await serveHttp(service);
    close = s.close;
    const check = async () => {
      const r = await fetch(`${s.url}/v1/check`, { method: "POST", body: JSON.stringify({ domain: "d", descriptors: [{ k: "a" }] }) });
      return { status: r.status, json: (await r.json()) as Record<string, any> };
    };
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await check());
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(answers.map((a) => a.json.allowed)).toEqual([true, true, true, true, true, false]);
    expect(answers[0]?.json.statuses[0]).toMatchObject({ limit: 5, explain: { rule: "d/k", source: "rule" } });
    // Over the Envoy RLS path too (its checks deny an oversize cost rather than refuse it).
    const rls = await service.decide({ domain: "d", descriptors: [[{ key: "k", value: "a" }]], oversizeCost: "deny" });
    expect(rls.statuses[0]).toMatchObject({ allowed: false, limit: 5 });
    const logged = lines.filter((l) => l.msg === MSG);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ domain: "d", key: "k=a", errorId: expect.stringMatching(/^[0-9a-f]{12}$/) });
    expect(String(logged[0]?.problem)).toMatch(/quantum-window/);
    // The row written again (a new version) is a new row: logged again, once.
    o.rewrite();
    await check();
    await check();
    expect(lines.filter((l) => l.msg === MSG)).toHaveLength(2);
  });
});
