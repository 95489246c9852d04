/**
 * `GET /v1/rules` needs no authentication, so it must not say where the rules live on the
 * server's disk: the absolute path of the rules file or directory (`/srv/app/ratelimit/config`)
 * tells anyone who can reach the port the filesystem layout and often the deployment's user.
 * Before, the answer's `source` was that path for everyone. Now it is given only to a caller
 * with the admin token (the dashboard, behind the same token, shows it too); the rest of the
 * document (domains, policies, rules) is as before.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, loadRulesFile } from "../../src/index.js";
import { serveHttp, TOKEN } from "./failing-parts.js";

const RULES = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n";

let dir: string;
let file: string;
let server: { url: string; close: () => void };

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-rules-source-"));
  file = path.join(dir, "rules.yaml");
  writeFileSync(file, RULES);
  const service = new DecisionService({ store: new MemoryStore(), rules: loadRulesFile(file) });
  server = await serveHttp(service);
});
afterAll(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

const rulesDoc = async (headers: Record<string, string> = {}) => {
  const r = await fetch(`${server.url}/v1/rules`, { headers });
  expect(r.status).toBe(200);
  return { text: await r.text() };
};

describe("GET /v1/rules", () => {
  it("does not tell an unauthenticated caller where the rules file is", async () => {
    const { text } = await rulesDoc();
    expect(text).not.toContain(dir);
    const doc = JSON.parse(text) as Record<string, unknown>;
    expect(doc).not.toHaveProperty("source");
    expect(doc.domains).toEqual(["d"]);
  });

  it("nor one with a wrong token", async () => {
    const { text } = await rulesDoc({ authorization: "Bearer nope" });
    expect(text).not.toContain(dir);
  });

  it("gives the path to a caller with the admin token", async () => {
    const { text } = await rulesDoc({ authorization: `Bearer ${TOKEN}` });
    expect((JSON.parse(text) as { source: string }).source).toBe(file);
  });
});
