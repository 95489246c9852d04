/**
 * `ratekeeper serve` with no --config (what `npx @ratekeeper/server serve` runs): the built-in
 * rules (packages/server/rules/default.yaml, shipped in the package), announced in the first
 * log line, answering the README's check.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startServiceProcess, type ServiceProc } from "./support.js";

let svc: ServiceProc;
beforeAll(async () => {
  svc = await startServiceProcess([]);
});
afterAll(() => svc?.stop());

describe("serve without --config", () => {
  it("says first that it runs the built-in default rules, and where they are", () => {
    const first = JSON.parse(svc.lines[0]!) as { level: number; msg: string; config: string };
    expect(first.msg).toMatch(/^no --config: serving the built-in default rules/);
    expect(first.config).toMatch(/packages\/server\/rules\/default\.yaml$/);
  });

  it("limits per remote_address in domain web and has a default policy for plain keys", async () => {
    const r = await postJson(`${svc.base}/v1/check`, { domain: "web", descriptors: [{ remote_address: "1.2.3.4" }] });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ allowed: true, statuses: [{ limit: 100, remaining: 99, policy: "100-per-1m" }] });
    const k = await postJson(`${svc.base}/v1/check`, { key: "user:42", policy: "default" });
    expect(k.json).toMatchObject({ allowed: true, statuses: [{ limit: 100, remaining: 99 }] });
  });
});
