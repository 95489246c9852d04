/**
 * Hostile input to the overrides admin API, through the service started in-process with its
 * overrides in SQLite (and, where the backends differ, PostgreSQL): keys the URL parser would
 * rewrite (`.`, `..`), strings a database cannot store as sent (U+0000, lone surrogates), an
 * expiry past what a date can hold, forged cursors. Each must get a clear 4xx naming the field,
 * or work; never a 503 that blames the database, and never an override that is stored under
 * another key than the one the answer names.
 */
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OverrideStore } from "../../src/overrides/types.js";
import type { InProcessService } from "../in-process.js";
import { createTestDatabase, postgresTestMode, serveWithOverrides, tempDir, type TestDatabase } from "../overrides-support.js";

const pgMode = await postgresTestMode();
const TOKEN = "hostile-input-token-0123456789";

/** One request with its path sent exactly as given (fetch would resolve `.` and `..` itself). */
function raw(port: number, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      { host: "127.0.0.1", port, method, path, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" } },
      (res) => {
        let data = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (data += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: data ? (JSON.parse(data) as unknown) : undefined }));
      },
    );
    req.on("error", reject);
    req.end(text);
  });
}

function backend(name: string, url: () => Promise<{ url: string; teardown(): Promise<void> }>, skip = false): void {
  describe.skipIf(skip)(`admin API hostile input: ${name}`, () => {
    let svc: InProcessService;
    let store: OverrideStore;
    let teardown: () => Promise<void>;
    const send = (method: string, path: string, body?: unknown) => raw(svc.httpPort, method, path, body);

    beforeAll(async () => {
      const u = await url();
      teardown = () => u.teardown();
      ({ svc, store } = await serveWithOverrides(u.url, { adminToken: TOKEN }));
    });
    afterAll(async () => {
      await svc?.close();
      await teardown?.();
    });

    it('keys and domains "." and ".." are read, replaced and deleted through their percent-encoded paths', async () => {
      for (const [domain, key] of [
        ["api", ".."],
        ["api", "."],
        ["..", "user_id=1"],
      ] as const) {
        const made = await send("POST", "/v1/admin/overrides", { domain, key, policy: "blocked" });
        expect(made.status).toBe(201);
        const path = `/v1/admin/overrides/${encodeURIComponent(domain).replaceAll(".", "%2E")}/${encodeURIComponent(key).replaceAll(".", "%2E")}`;
        const read = await send("GET", path);
        expect([read.status, read.body?.domain, read.body?.key], `GET ${path}`).toEqual([200, domain, key]);
        expect((await send("PUT", path, { policy: "unlimited" })).status, `PUT ${path}`).toBe(200);
        expect((await send("DELETE", path)).status, `DELETE ${path}`).toBe(204);
        expect(await store.get(domain, key)).toBeUndefined();
      }
    });

    it("a ttl that takes the expiry past the last date is a 400, not an override that fails every check", async () => {
      const r = await send("PUT", "/v1/admin/overrides/api/user_id=far", { policy: "blocked", ttl: 9e15 });
      const check = await send("POST", "/v1/check", { domain: "api", descriptors: [[{ key: "user_id", value: "far" }]] });
      expect([check.status, check.body?.message]).toEqual([200, undefined]);
      expect([r.status, r.body?.message]).toEqual([400, expect.stringMatching(/^ttl: /)]);
    });

    it("U+0000 and lone surrogates are refused with 400 naming the field; nothing is written", async () => {
      const bodies: [unknown, RegExp][] = [
        [{ domain: "api", key: "user_id=nul", policy: "blocked", note: "a\u0000b" }, /^note: /],
        [{ domain: "api", key: "user_id=\ud800", policy: "blocked" }, /^key: /],
        [{ domain: "a\udc00", key: "user_id=1", policy: "blocked" }, /^domain: /],
        [{ domain: "api", key: "user_id=ok", policy: "blocked", note: "x\udfff" }, /^note: /],
      ];
      for (const [body, message] of bodies) {
        const r = await send("POST", "/v1/admin/overrides", body);
        expect([r.status, r.body?.message], JSON.stringify(body)).toEqual([400, expect.stringMatching(message)]);
      }
      expect((await store.list({ limit: 1000 })).items.filter((o) => o.key !== "user_id=far")).toEqual([]);
    });

    it("U+0000 in a path, a query parameter or a forged cursor is a 400, not a database failure", async () => {
      const forged = Buffer.from(JSON.stringify(["api", "a\u0000"]), "utf8").toString("base64url");
      for (const path of [
        "/v1/admin/overrides/api/user_id%3D%00",
        "/v1/admin/overrides/a%00/user_id=1",
        "/v1/admin/overrides?domain=a%00",
        "/v1/admin/overrides?prefix=%00",
        `/v1/admin/overrides?cursor=${forged}`,
        "/v1/admin/keys/api/user_id=1%00/unblock",
      ]) {
        const method = path.endsWith("unblock") ? "POST" : "GET";
        const r = await send(method, path);
        expect([r.status, r.body?.error], `${method} ${path}`).toEqual([400, "bad_request"]);
      }
    });

    it("a key longer than any check can carry (512 characters) is a 400, not an override that never applies", async () => {
      const longest = `user_id=${"v".repeat(504)}`;
      expect((await send("POST", "/v1/admin/overrides", { domain: "api", key: longest, policy: "blocked" })).status).toBe(201);
      const check = await send("POST", "/v1/check", { domain: "api", descriptors: [[{ key: "user_id", value: "v".repeat(504) }]] });
      expect([check.status, check.body?.allowed, check.body?.statuses?.[0]?.explain?.source]).toEqual([200, false, "override"]);
      const r = await send("POST", "/v1/admin/overrides", { domain: "api", key: `${longest}v`, policy: "blocked" });
      expect([r.status, r.body?.message]).toEqual([400, expect.stringMatching(/^key: must be at most 512 characters/)]);
      expect((await send("DELETE", `/v1/admin/overrides/api/${longest}`)).status).toBe(204);
    });

    it("a window spelled with a line terminator, a BOM or a run of zeros: checks on the override are answered", async () => {
      // The limit's default name carries the window into every answer's headers (packages/ratekeeper hostile/window-spelling.test.ts).
      for (const [i, window] of ["1s\u2028", "\ufeff1s", "1s\n", `${"0".repeat(20_000)}1s`].entries()) {
        const put = await send("PUT", `/v1/admin/overrides/api/user_id=w${i}`, {
          limits: [{ algorithm: "fixed-window", limit: 5, window }],
        });
        expect(put.status).toBe(201);
        const check = await send("POST", "/v1/check", { domain: "api", descriptors: [[{ key: "user_id", value: `w${i}` }]] });
        expect([check.status, check.body?.statuses?.[0]?.policy], JSON.stringify(window).slice(0, 20)).toEqual([200, "5-per-1s"]);
      }
    });

    it("lists by a prefix holding characters outside the BMP", async () => {
      for (const key of ["\u{1F600}a", "\u{1F600}b", "\u{1F601}"]) {
        expect((await send("PUT", `/v1/admin/overrides/emoji/${encodeURIComponent(key)}`, { policy: "blocked" })).status).toBe(201);
      }
      const r = await send("GET", `/v1/admin/overrides?domain=emoji&prefix=${encodeURIComponent("\u{1F600}")}`);
      expect(r.body.items.map((o: { key: string }) => o.key)).toEqual(["\u{1F600}a", "\u{1F600}b"]);
    });
  });
}

backend("SQLite", async () => {
  const dir = tempDir("hostile-input");
  return { url: `sqlite:${dir.file("overrides.db")}`, teardown: async () => dir.remove() };
});

backend(
  "PostgreSQL",
  async () => {
    const db: TestDatabase = await createTestDatabase("input");
    return { url: db.url, teardown: () => db.drop() };
  },
  pgMode === "skip",
);
