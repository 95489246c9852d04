/**
 * A policy of many limits, from an admin (an override's `limits`) or the rules file. Every
 * check on it answers with the limit headers, which name every limit (`RateLimit-Policy`,
 * `RateLimit`): past a few hundred limits they outgrow the 16 KiB of headers that Node (and
 * so fetch, and most proxies' defaults) read, and every check on the key failed at the client
 * while the override itself was acknowledged with a 201. Policies are capped at
 * MAX_POLICY_LIMITS limits, refused with a 4xx (or a RulesError) naming `limits`; a policy at
 * the cap, with the longest names, still answers checks a client can read.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OverrideStore } from "../../src/overrides/types.js";
import { parseRules, RulesError } from "../../src/index.js";
import type { InProcessService } from "../in-process.js";
import { call, serveWithOverrides, tempDir } from "../overrides-support.js";

const TOKEN = "policy-limits-cap-token-0123456789";
/** The cap the service documents (docs/overrides.md, docs/service.md). */
const CAP = 32;

/** `n` limits with names of the longest allowed length (64 characters) and distinct windows. */
function limits(n: number): object[] {
  return Array.from({ length: n }, (_, i) => ({
    algorithm: "fixed-window",
    limit: 1_000_000 + i,
    window: `${i + 1}h`,
    name: `${String(i).padStart(2, "0")}${"n".repeat(62)}`,
  }));
}

describe("policies of many limits", () => {
  let svc: InProcessService;
  let store: OverrideStore;
  const dir = tempDir("policy-cap");
  beforeAll(async () => {
    // Every header style at once: the largest answer a check can get.
    ({ svc, store } = await serveWithOverrides(`sqlite:${dir.file("overrides.db")}`, {
      adminToken: TOKEN,
      headerStyles: ["ietf", "draft-7", "draft-6", "x-ratelimit"],
    }));
  });
  afterAll(async () => {
    await svc?.close();
    dir.remove();
  });
  const base = () => `http://127.0.0.1:${svc.httpPort}`;

  it("an override of more limits than the cap is a 400 naming limits; nothing is written", async () => {
    for (const n of [CAP + 1, 1000]) {
      const r = await call(base(), "PUT", "/v1/admin/overrides/api/user_id=many", { token: TOKEN, body: { limits: limits(n) } });
      expect([r.status, r.body?.issues?.[0]?.path, r.body?.message], `${n} limits`).toEqual([
        400,
        "limits",
        expect.stringContaining(`at most ${CAP} limits`),
      ]);
    }
    expect(await store.get("api", "user_id=many")).toBeUndefined();
  });

  it("an override at the cap, with the longest names, answers checks a client can read", async () => {
    const r = await call(base(), "PUT", "/v1/admin/overrides/api/user_id=cap", { token: TOKEN, body: { limits: limits(CAP) } });
    expect(r.status).toBe(201);
    // fetch (undici) refuses an answer whose headers pass 16 KiB, as node:http does.
    const check = await call(base(), "POST", "/v1/check", { body: { domain: "api", descriptors: [[{ key: "user_id", value: "cap" }]] } });
    expect([check.status, check.body?.allowed, check.body?.statuses?.[0]?.explain?.source]).toEqual([200, true, "override"]);
  });

  it("a rules file policy of more limits than the cap is a RulesError naming its limits", () => {
    const yaml = (n: number) =>
      `domains:\n  - domain: api\n    descriptors:\n      - key: user_id\n        limits:\n${limits(n)
        .map((l) => `          - ${JSON.stringify(l)}\n`)
        .join("")}`;
    expect(() => parseRules(yaml(CAP), "rules.yaml")).not.toThrow();
    let error: unknown;
    try {
      parseRules(yaml(CAP + 1), "rules.yaml");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RulesError);
    expect((error as RulesError).issues).toEqual([
      { path: "domains[0].descriptors[0].limits", message: expect.stringContaining(`at most ${CAP} limits`) },
    ]);
  });
});
