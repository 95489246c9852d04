/**
 * One error body for every HTTP answer that is not a success, on every route of the service
 * (decision API, admin API, dashboard): `{"error": "<code>", "message": "<what is wrong, naming
 * the field>"}` (plus `issues` for a list of problems), as application/json, with one table from
 * code to status. And one bearer check, the same on every protected route.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServiceProcess, type ServiceProc } from "../support.js";

const TOKEN = "error-shape-admin-token-0123456789";
let svc: ServiceProc;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-hostile-errors-"));
  writeFileSync(
    path.join(dir, "rules.yaml"),
    "domains:\n  - domain: d\n    descriptors:\n      - key: k\n        algorithm: gcra\n        limit: 5\n        window: 1s\n",
  );
  svc = await startServiceProcess(
    ["--config", path.join(dir, "rules.yaml"), "--no-watch", "--overrides", `sqlite:${path.join(dir, "o.db")}`],
    {
      RATEKEEPER_ADMIN_TOKEN: TOKEN,
    },
  );
});

afterAll(async () => {
  await svc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function call(method: string, url: string, opts: { body?: string; token?: string; scheme?: string } = {}) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (opts.token) headers.authorization = `${opts.scheme ?? "Bearer"} ${opts.token}`;
  const r = await fetch(`${svc.base}${url}`, { method, headers, body: opts.body });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

/** The one shape: exactly error and message (and issues when there are several), JSON. */
function expectError(r: Awaited<ReturnType<typeof call>>, status: number, code: string, message: RegExp): void {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get("content-type")).toMatch(/^application\/json/);
  expect(r.json?.error).toBe(code);
  expect(String(r.json?.message)).toMatch(message);
  expect(Object.keys(r.json ?? {}).filter((k) => k !== "issues")).toEqual(["error", "message"]);
}

describe("one error body shape on every route", () => {
  it("decision API: bad JSON, a bad field, too large, wrong method, unknown route", async () => {
    expectError(await call("POST", "/v1/check", { body: "{nope" }), 400, "bad_request", /body: not valid JSON/);
    expectError(await call("POST", "/v1/check", { body: '{"domain":"d","descriptors":[],"x":1}' }), 400, "bad_request", /x: unknown field/);
    expectError(await call("POST", "/v1/check", { body: "x".repeat(70_000) }), 413, "payload_too_large", /body: .*65536 bytes/);
    const m = await call("GET", "/v1/check");
    expectError(m, 405, "method_not_allowed", /POST/);
    expect(m.headers.get("allow")).toBe("POST");
    expectError(await call("GET", "/v1/auth?domain=d&d=k%3D1&cost=abc"), 400, "bad_request", /cost/);
    expectError(await call("GET", "/v1/keys/d"), 400, "bad_request", /path/);
    expectError(await call("GET", "/nope"), 404, "not_found", /no route GET \/nope/);
  });

  it("a batch reports each bad check in the same shape", async () => {
    const r = await call("POST", "/v1/check", {
      body: JSON.stringify({ checks: [{ domain: "d", descriptors: [{ k: "1" }] }, { domain: "d" }] }),
    });
    expect(r.status).toBe(200);
    const results = r.json?.results as Record<string, unknown>[];
    expect(results[1]).toEqual({ error: "bad_request", message: expect.stringMatching(/checks\[1\]\.descriptors/) });
  });

  it("admin API: no token, a wrong one, an unknown route, a bad body", async () => {
    const none = await call("GET", "/v1/admin/overrides");
    expectError(none, 401, "unauthorized", /Bearer/);
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expectError(await call("GET", "/v1/admin/overrides", { token: "wrong-token-0123456789" }), 401, "unauthorized", /Bearer/);
    expectError(await call("GET", "/v1/admin/nope", { token: TOKEN }), 404, "not_found", /no admin route/);
    expectError(await call("PUT", "/v1/admin/overrides/d/k=1", { token: TOKEN, body: "{" }), 400, "bad_request", /body: not valid JSON/);
    expect((await call("GET", "/v1/admin/overrides", { token: TOKEN, scheme: "bearer" })).status).toBe(200);
  });

  it("dashboard: the same 401 body, and the same bearer check (any case of the scheme)", async () => {
    expectError(await call("GET", "/dashboard/api/state"), 401, "unauthorized", /token/);
    expect((await call("GET", "/dashboard/api/state", { token: TOKEN, scheme: "bearer" })).status).toBe(200);
    expect((await call("GET", "/dashboard/api/state", { token: TOKEN, scheme: "BEARER" })).status).toBe(200);
    const basic = Buffer.from(`admin:${TOKEN}`).toString("base64");
    expect((await call("GET", "/dashboard/api/state", { token: basic, scheme: "Basic" })).status).toBe(200);
    expectError(await call("POST", "/dashboard/api/state", { token: TOKEN }), 405, "method_not_allowed", /GET/);
    expectError(await call("GET", "/dashboard/nope", { token: TOKEN }), 404, "not_found", /no dashboard route/);
  });
});
