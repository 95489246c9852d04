/**
 * Bad input to the service's HTTP API, sent to the real process: every answer is a 4xx that names
 * the field and says what to send, never a 5xx, a crash, or a silent pass.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServiceProcess, type ServiceProc } from "../support.js";

const RULES = `
domains:
  - domain: web
    descriptors:
      - key: remote_address
        algorithm: token-bucket
        limit: 100
        window: 1d
`;
const TOKEN = "hostile-input-admin-token-0123456789";

let svc: ServiceProc;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-hostile-http-"));
  writeFileSync(path.join(dir, "rules.yaml"), RULES);
  svc = await startServiceProcess(["--config", path.join(dir, "rules.yaml"), "--no-watch", "--admin-token", TOKEN], {
    RATEKEEPER_ADMIN_TOKEN: "",
  });
});

afterAll(async () => {
  await svc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function answer(url: string, init?: RequestInit): Promise<{ status: number; body: string; headers: Headers }> {
  const r = await fetch(`${svc.base}${url}`, init);
  return { status: r.status, body: await r.text(), headers: r.headers };
}

describe("/v1/auth: the cost must be a positive whole number in decimal", () => {
  for (const cost of ["abc", "0x10", "1e2", "-1", "0", "1.5", " 5", "+5", "", "99999999999999999999"]) {
    it(`cost=${JSON.stringify(cost)} is refused with 400 naming the cost and what to send`, async () => {
      const q = await answer(`/v1/auth?domain=web&d=remote_address%3D10.1.1.1&cost=${encodeURIComponent(cost)}`);
      expect(q.status, q.body).toBe(400);
      expect(q.body).toMatch(/cost/);
      expect(q.body).toMatch(/positive whole number/);
      expect(q.body).not.toMatch(/got null/);
      // (A header value's surrounding spaces are not part of it: HTTP strips them.)
      if (cost.trim() !== cost) return;
      const h = await answer(`/v1/auth?domain=web&d=remote_address%3D10.1.1.1`, { headers: { "x-ratelimit-cost": cost } });
      expect(h.status, h.body).toBe(400);
      expect(h.body).toMatch(/cost/);
    });
  }
  it("a decimal cost is taken", async () => {
    const r = await answer(`/v1/auth?domain=web&d=remote_address%3D10.1.1.2&cost=12`);
    expect(r.status).toBe(204);
    expect(r.headers.get("ratelimit")).toMatch(/;r=88;/);
  });
});

describe("request-shape caps, the same as gRPC's, each a 400 naming the cap", () => {
  const post = (body: unknown) =>
    answer("/v1/check", { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  it("65 descriptors", async () => {
    const descriptors = Array.from({ length: 65 }, (_, i) => ({ remote_address: `10.9.0.${i}` }));
    const r = await post({ domain: "web", descriptors });
    expect(r.status).toBe(400);
    expect(r.body).toMatch(/descriptors: at most 64 per call \(got 65\)/);
  });
  it("33 entries in a descriptor", async () => {
    const entries = Array.from({ length: 33 }, (_, i) => ({ key: `k${i}`, value: "v" }));
    const r = await post({ domain: "web", descriptors: [entries] });
    expect(r.status).toBe(400);
    expect(r.body).toMatch(/descriptors\[0\]: at most 32 entries \(got 33\)/);
  });
  it("a 300-character entry key", async () => {
    const r = await post({ domain: "web", descriptors: [[{ key: "k".repeat(300), value: "v" }]] });
    expect(r.status).toBe(400);
    expect(r.body).toMatch(/descriptors\[0\]\[0\]\.key: at most 256 characters \(got 300\)/);
  });
  it("/v1/auth: a 600-character value in a descriptor header", async () => {
    const r = await answer(`/v1/auth?domain=web`, { headers: { "x-ratelimit-descriptor": `remote_address=${"9".repeat(600)}` } });
    expect(r.status).toBe(400);
    expect(r.body).toMatch(/descriptors\[0\]\[0\]\.value: at most 512 characters \(got 600\)/);
  });
});

describe("/v1/auth answers GET and HEAD only", () => {
  for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
    it(`${method} gets 405 with Allow: GET, HEAD, and charges nothing`, async () => {
      const r = await answer(`/v1/auth?domain=web&d=remote_address%3D10.1.1.3`, { method });
      expect(r.status).toBe(405);
      expect(r.headers.get("allow")).toBe("GET, HEAD");
    });
  }
  it("HEAD is GET without a body", async () => {
    const r = await answer(`/v1/auth?domain=web&d=remote_address%3D10.1.1.3`, { method: "HEAD" });
    expect(r.status).toBe(204);
    expect(r.headers.get("ratelimit")).toMatch(/;r=99;/); // the 405s above charged nothing
  });
});

describe("descriptor values that are not well-formed text", () => {
  it("a lone surrogate in a descriptor value is a 400 naming it, not a store failure", async () => {
    const body = `{"domain":"web","descriptors":[[{"key":"remote_address","value":"a\\ud800"}]]}`;
    const r = await answer("/v1/check", { method: "POST", body, headers: { "content-type": "application/json" } });
    expect(r.status, r.body).toBe(400);
    expect(r.body).toMatch(/surrogate/);
  });
});

describe("admin API: the bearer scheme is case-insensitive (RFC 9110 section 11.1)", () => {
  for (const scheme of ["Bearer", "bearer", "BEARER", "bEaReR"]) {
    it(`${scheme} <token> is accepted`, async () => {
      const r = await answer("/v1/admin/overrides", { headers: { authorization: `${scheme} ${TOKEN}` } });
      expect(r.status, r.body).not.toBe(401);
    });
  }
  it("a wrong token is still refused", async () => {
    const r = await answer("/v1/admin/overrides", { headers: { authorization: `bearer ${TOKEN}x` } });
    expect(r.status).toBe(401);
  });
});
