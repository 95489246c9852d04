/**
 * The admin API warns, and still writes, when an override it is given admits less than one
 * request of a rule of its domain costs (that rule's `cost`): every check of the key under that
 * rule would be denied (service/override.ts). It does not refuse the override: the rules change on
 * reload, and the key may not match that rule. Before, the answer said nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import { SqliteOverrideStore } from "../../src/overrides/sqlite.js";
import { tempDir } from "../overrides-support.js";
import { serveHttp, TOKEN } from "./failing-parts.js";

const RULES = `
domain: d
descriptors:
  - key: heavy
    cost: 5
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: light
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;

const tmp = tempDir("admin-cost-warning");
let store: SqliteOverrideStore;
let server: { url: string; close: () => void };

beforeAll(async () => {
  store = new SqliteOverrideStore({ path: tmp.file("o.db") });
  const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "rules.yaml") });
  server = await serveHttp(service, { overridesStore: store });
});
afterAll(async () => {
  server.close();
  await store.close();
  tmp.remove();
});

async function put(key: string, limit: number): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${server.url}/v1/admin/overrides/d/${key}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ limits: [{ algorithm: "fixed-window", limit, window: "1m" }] }),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

describe("writing an override below a rule's cost", () => {
  it("is done, with a warning naming the rule, its cost and what the override admits", async () => {
    const r = await put("heavy=a", 3);
    expect(r.status).toBe(201);
    expect(r.json.key).toBe("heavy=a");
    expect(r.json.warnings).toEqual([
      "rule d/heavy costs 5 a request, more than this override could ever admit (at most 3): this key matches that rule, so every check of it is denied, except a check that sends a limit with the descriptor (Envoy's route config), which the override decides at the client's cost alone",
    ]);
    const post = await fetch(`${server.url}/v1/admin/overrides`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ domain: "d", key: "heavy=b", limits: [{ algorithm: "gcra", limit: 1, window: "1s", burst: 1 }] }),
    });
    expect(post.status).toBe(201);
    expect(((await post.json()) as { warnings?: string[] }).warnings).toHaveLength(1);
  });

  it("names only the rules its key matches: a key of another rule of the domain has no warning", async () => {
    const r = await put("light=b", 3);
    expect(r.status).toBe(201);
    expect(r.json).not.toHaveProperty("warnings");
    // A key no rule matches has none either (its checks are not limited by a rule's cost).
    const none = await put("other=c", 1);
    expect(none.json).not.toHaveProperty("warnings");
  });

  it("has no warnings when every rule of its domain fits", async () => {
    const r = await put("light=a", 5);
    expect(r.status).toBe(201);
    expect(r.json).not.toHaveProperty("warnings");
  });
});
