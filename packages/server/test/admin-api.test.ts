/**
 * The admin API through the real service process (`ratekeeper serve --overrides sqlite:FILE
 * --admin-token T`) over loopback HTTP: bearer auth (401 and nothing changes), validation (400
 * with the path), 404 / 409 / 413, CRUD with paging, block / unblock, peek and reset, and the
 * API being off (404) without a token.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OverrideCache } from "../src/overrides/cache.js";
import { SqliteOverrideStore } from "../src/overrides/sqlite.js";
import { createAdminHandler } from "../src/transport/admin.js";
import { call, checkUser, tempDir, writeRules } from "./overrides-support.js";
import { startServiceProcess, type ServiceProc } from "./support.js";

const TOKEN = "test-admin-token-0123456789";
const fiveASecond = [{ algorithm: "fixed-window", limit: 5, window: "1s" }];

describe("admin API (service process, SQLite overrides)", () => {
  const tmp = tempDir("admin");
  let svc: ServiceProc;
  let dbFile: string;

  beforeAll(async () => {
    dbFile = tmp.file("overrides.db");
    svc = await startServiceProcess(["--no-watch", "--config", writeRules(tmp.dir), "--overrides", `sqlite:${dbFile}`], {
      RATEKEEPER_ADMIN_TOKEN: TOKEN,
    });
  });
  afterAll(async () => {
    await svc?.stop();
    tmp.remove();
  });

  async function storedCount(): Promise<number> {
    const s = new SqliteOverrideStore({ path: dbFile });
    try {
      return (await s.list({ limit: 1000 })).items.length;
    } finally {
      await s.close();
    }
  }

  it("answers 401 without a token or with a wrong one, and changes nothing", async () => {
    const before = await storedCount();
    const attempts: [string, string, unknown][] = [
      ["GET", "/v1/admin/overrides", undefined],
      ["POST", "/v1/admin/overrides", { domain: "api", key: "user_id=1", policy: "blocked" }],
      ["PUT", "/v1/admin/overrides/api/user_id=1", { limits: fiveASecond }],
      ["DELETE", "/v1/admin/overrides/api/user_id=1", undefined],
      ["POST", "/v1/admin/keys/api/user_id=1/block", {}],
      ["POST", "/v1/admin/keys/api/user_id=1/reset", undefined],
    ];
    for (const [method, path, body] of attempts) {
      for (const token of [undefined, "wrong", `${TOKEN}x`, TOKEN.slice(0, -1), ""]) {
        const r = await call(svc.base, method, path, { token, body });
        expect(r.status, `${method} ${path} with ${JSON.stringify(token)}`).toBe(401);
      }
    }
    expect(await storedCount()).toBe(before);
    expect((await checkUser(svc.base, "1")).source).toBe("rule");
  });

  it("rejects bad bodies with 400 naming the path, and writes nothing", async () => {
    const before = await storedCount();
    const cases: [string, string, { body?: unknown; raw?: string }, RegExp][] = [
      ["POST", "/v1/admin/overrides", { raw: "{not json" }, /body: not valid JSON/],
      ["POST", "/v1/admin/overrides", { raw: "" }, /body: required/],
      ["POST", "/v1/admin/overrides", { body: { domain: "api", key: "user_id=1" } }, /limits: required/],
      [
        "POST",
        "/v1/admin/overrides",
        { body: { domain: "api", key: "user_id=1", limits: [{ algorithm: "fixed-window", limit: 5, window: "-1s" }] } },
        /limits\[0\]\.window: must be/,
      ],
      [
        "POST",
        "/v1/admin/overrides",
        { body: { domain: "api", key: "user_id=1", limits: [{ algorithm: "gcra", limit: 0, window: "1s", bogus: 1 }] } },
        /limits\[0\]\.bogus: unknown option/,
      ],
      ["POST", "/v1/admin/overrides", { body: { domain: "api", key: "user_id=1", limits: [] } }, /limits: must be a non-empty array/],
      ["POST", "/v1/admin/overrides", { body: { domain: "api", key: "user_id=1", policy: "banned" } }, /policy: /],
      [
        "POST",
        "/v1/admin/overrides",
        { body: { domain: "api", key: "user_id=1", policy: "blocked", ttl: "1h", expiresAtMs: 1 } },
        /ttl: give either/,
      ],
      ["POST", "/v1/admin/overrides", { body: { domain: "api", key: "user_id=1", policy: "blocked", ttl: "soon" } }, /ttl: must be/],
      [
        "POST",
        "/v1/admin/overrides",
        { body: { domain: "api", key: "user_id=1", policy: "blocked", color: "red" } },
        /unknown field\(s\) "color"/,
      ],
      ["POST", "/v1/admin/overrides", { body: [1, 2] }, /expected object/],
      ["PUT", "/v1/admin/overrides/api/user_id=1", { body: { key: "user_id=2", policy: "blocked" } }, /key: must match the URL/],
      ["POST", "/v1/admin/keys/api/user_id=1/block", { body: { limits: fiveASecond } }, /limits: not allowed here/],
      ["GET", "/v1/admin/overrides?limit=0", {}, /limit: must be a whole number from 1 to 1000/],
      ["GET", "/v1/admin/overrides?cursor=zzz", {}, /cursor: /],
    ];
    for (const [method, path, opts, message] of cases) {
      const r = await call(svc.base, method, path, { token: TOKEN, ...opts });
      expect(r.status, `${method} ${path} ${JSON.stringify(opts)}`).toBe(400);
      expect(r.body.message, `${method} ${path} ${JSON.stringify(opts)}`).toMatch(message);
    }
    expect(await storedCount()).toBe(before);
  });

  it("answers 413 for a body over the limit and 404 for what does not exist", async () => {
    const huge = JSON.stringify({ domain: "api", key: "user_id=1", policy: "blocked", note: "x".repeat(2 * 1024 * 1024) });
    const big = await call(svc.base, "POST", "/v1/admin/overrides", { token: TOKEN, raw: huge });
    expect(big.status).toBe(413);
    expect((await call(svc.base, "GET", "/v1/admin/overrides/api/user_id=404", { token: TOKEN })).status).toBe(404);
    expect((await call(svc.base, "DELETE", "/v1/admin/overrides/api/user_id=404", { token: TOKEN })).status).toBe(404);
    expect((await call(svc.base, "POST", "/v1/admin/keys/api/user_id=404/unblock", { token: TOKEN })).status).toBe(404);
    expect((await call(svc.base, "GET", "/v1/admin/nothing-here", { token: TOKEN })).status).toBe(404);
  });

  it("creates, reads, replaces, lists with paging and deletes; every change applies to the next check", async () => {
    const created = await call(svc.base, "POST", "/v1/admin/overrides", {
      token: TOKEN,
      body: { domain: "api", key: "user_id=241531", limits: fiveASecond, note: "5 a second" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ domain: "api", key: "user_id=241531", limits: fiveASecond, note: "5 a second" });
    // Read-your-writes: the very next check through this instance uses the override.
    const c1 = await checkUser(svc.base, "241531");
    expect(c1).toMatchObject({ allowed: true, limit: 5, source: "override" });

    const conflict = await call(svc.base, "POST", "/v1/admin/overrides", {
      token: TOKEN,
      body: { domain: "api", key: "user_id=241531", policy: "blocked" },
    });
    expect(conflict.status).toBe(409);

    const read = await call(svc.base, "GET", "/v1/admin/overrides/api/user_id%3D241531", { token: TOKEN });
    expect(read.status).toBe(200);
    expect(read.body.version).toBe(created.body.version);

    const replaced = await call(svc.base, "PUT", "/v1/admin/overrides/api/user_id=241531", { token: TOKEN, body: { policy: "unlimited" } });
    expect(replaced.status).toBe(200);
    expect(replaced.body.version).toBeGreaterThan(created.body.version);
    expect((await checkUser(svc.base, "241531")).source).toBe("override");
    expect((await checkUser(svc.base, "241531")).limit).toBeNull();

    const fresh = await call(svc.base, "PUT", "/v1/admin/overrides/api/user_id=77", {
      token: TOKEN,
      body: { limits: [{ algorithm: "gcra", limit: 1, window: "1h" }] },
    });
    expect(fresh.status).toBe(201);
    expect((await checkUser(svc.base, "77")).allowed).toBe(true);
    expect((await checkUser(svc.base, "77")).allowed).toBe(false);

    for (let i = 0; i < 12; i++) {
      const r = await call(svc.base, "PUT", `/v1/admin/overrides/paged/k${String(i).padStart(2, "0")}`, {
        token: TOKEN,
        body: { policy: "blocked" },
      });
      expect(r.status).toBe(201);
    }
    const keys: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const q: string = `/v1/admin/overrides?domain=paged&limit=5${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const page = await call(svc.base, "GET", q, { token: TOKEN });
      expect(page.status).toBe(200);
      keys.push(...page.body.items.map((o: { key: string }) => o.key));
      cursor = page.body.nextCursor;
      if (!cursor) break;
    }
    expect(keys).toEqual(Array.from({ length: 12 }, (_, i) => `k${String(i).padStart(2, "0")}`));

    const del = await call(svc.base, "DELETE", "/v1/admin/overrides/api/user_id=241531", { token: TOKEN });
    expect(del.status).toBe(204);
    expect((await checkUser(svc.base, "241531")).source).toBe("rule");
    expect((await call(svc.base, "GET", "/v1/admin/overrides/api/user_id=241531", { token: TOKEN })).status).toBe(404);
  });

  it("blocks (with an expiry) and unblocks a key; peeks and resets its counters", async () => {
    const blocked = await call(svc.base, "POST", "/v1/admin/keys/api/user_id=666/block", {
      token: TOKEN,
      body: { ttl: "1h", note: "abuse" },
    });
    expect(blocked.status).toBe(200);
    expect(blocked.body).toMatchObject({ policy: "blocked", note: "abuse" });
    expect(blocked.body.expiresAtMs).toBeGreaterThan(Date.now() + 3_500_000);
    const denied = await checkUser(svc.base, "666");
    expect(denied).toMatchObject({ allowed: false, policy: "blocked", source: "override" });
    const peek = await call(svc.base, "GET", "/v1/admin/keys/api/user_id=666", { token: TOKEN });
    expect(peek.status).toBe(200);
    expect(peek.body.override.policy).toBe("blocked");
    expect(peek.body.result.allowed).toBe(false);

    const unblocked = await call(svc.base, "POST", "/v1/admin/keys/api/user_id=666/unblock", { token: TOKEN });
    expect(unblocked.status).toBe(200);
    expect(await checkUser(svc.base, "666")).toMatchObject({ allowed: true, source: "rule" });
    expect((await call(svc.base, "POST", "/v1/admin/keys/api/user_id=666/unblock", { token: TOKEN })).status).toBe(404);

    // Reset: spend a 2-per-hour override, reset, and it admits again.
    await call(svc.base, "PUT", "/v1/admin/overrides/api/user_id=5", {
      token: TOKEN,
      body: { limits: [{ algorithm: "fixed-window", limit: 2, window: "1h" }] },
    });
    await checkUser(svc.base, "5");
    await checkUser(svc.base, "5");
    expect((await checkUser(svc.base, "5")).allowed).toBe(false);
    const peek5 = await call(svc.base, "GET", "/v1/admin/keys/api/user_id=5", { token: TOKEN });
    expect(peek5.body.result.statuses[0].remaining).toBe(0);
    const reset = await call(svc.base, "POST", "/v1/admin/keys/api/user_id=5/reset", { token: TOKEN });
    expect(reset.status).toBe(200);
    expect((await checkUser(svc.base, "5")).allowed).toBe(true);
  });

  it("lets an expired block lapse on its own", async () => {
    const r = await call(svc.base, "POST", "/v1/admin/keys/api/user_id=900/block", {
      token: TOKEN,
      body: { expiresAtMs: Date.now() + 800 },
    });
    expect(r.status).toBe(200);
    expect((await checkUser(svc.base, "900")).allowed).toBe(false);
    // Bounded wait for the wall clock to pass the expiry (the cache test covers expiry with a manual clock).
    const deadline = Date.now() + 15_000;
    let allowed = false;
    while (!allowed && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
      allowed = (await checkUser(svc.base, "900")).allowed;
    }
    expect(allowed).toBe(true);
    expect((await call(svc.base, "GET", "/v1/admin/overrides/api/user_id=900", { token: TOKEN })).status).toBe(404);
  });
});

describe("admin API without a token", () => {
  const tmp = tempDir("admin-off");
  let svc: ServiceProc;
  beforeAll(async () => {
    svc = await startServiceProcess(["--no-watch", "--config", writeRules(tmp.dir), "--overrides", `sqlite:${tmp.file("o.db")}`]);
  });
  afterAll(async () => {
    await svc?.stop();
    tmp.remove();
  });

  it("is off: every admin route answers 404, whatever the Authorization header", async () => {
    for (const token of [undefined, "anything", ""]) {
      expect((await call(svc.base, "GET", "/v1/admin/overrides", { token })).status).toBe(404);
      expect(
        (await call(svc.base, "POST", "/v1/admin/overrides", { token, body: { domain: "api", key: "user_id=1", policy: "blocked" } }))
          .status,
      ).toBe(404);
    }
    expect((await checkUser(svc.base, "1")).source).toBe("rule");
  });
});

describe("admin handler mounted by an embedder (it checks the token itself)", () => {
  const tmp = tempDir("admin-embed");
  let store: SqliteOverrideStore;
  let cache: OverrideCache;
  let server: Server;
  let base: string;
  let offServer: Server;
  let offBase: string;

  async function listen(handler: ReturnType<typeof createAdminHandler>): Promise<[Server, string]> {
    const srv = createServer((req, res) => {
      void handler(req, res).then((handled) => {
        if (!handled) {
          res.statusCode = 418;
          res.end();
        }
      });
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    return [srv, `http://127.0.0.1:${(srv.address() as AddressInfo).port}`];
  }

  beforeAll(async () => {
    store = new SqliteOverrideStore({ path: tmp.file("o.db") });
    cache = await OverrideCache.start(store, { purgeIntervalMs: 0, resyncIntervalMs: 0 });
    [server, base] = await listen(createAdminHandler({ token: TOKEN, overrides: store }));
    [offServer, offBase] = await listen(createAdminHandler({ token: "", overrides: store }));
  });
  afterAll(async () => {
    await new Promise((r) => server?.close(r));
    await new Promise((r) => offServer?.close(r));
    cache?.close();
    await store?.close();
    tmp.remove();
  });

  it("401 for a missing, malformed, wrong or near-miss token; nothing written", async () => {
    for (const auth of [undefined, "wrong", `${TOKEN}0`, TOKEN.slice(1), TOKEN.toUpperCase()]) {
      const r = await call(base, "PUT", "/v1/admin/overrides/api/user_id=1", { token: auth, body: { policy: "blocked" } });
      expect(r.status).toBe(401);
    }
    const raw = await fetch(`${base}/v1/admin/overrides`, { headers: { authorization: TOKEN } }); // no "Bearer"
    expect(raw.status).toBe(401);
    expect(raw.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(await store.get("api", "user_id=1")).toBeUndefined();
    expect(cache.get("api", "user_id=1", Date.now())).toBeUndefined();
  });

  it("with the right token, writes reach the cache before the answer; other URLs are left to the caller", async () => {
    const r = await call(base, "PUT", "/v1/admin/overrides/api/user_id=1", { token: TOKEN, body: { limits: fiveASecond } });
    expect(r.status).toBe(201);
    expect(cache.get("api", "user_id=1", Date.now())?.policy).toEqual({ limits: fiveASecond });
    expect((await call(base, "GET", "/v1/check")).status).toBe(418);
    // Peek and reset need the decision service, which this embedder did not give.
    expect((await call(base, "GET", "/v1/admin/keys/api/user_id=1", { token: TOKEN })).status).toBe(404);
  });

  it("a write whose cache refresh fails still answers (it is durable) and tells the log this instance applies it later", async () => {
    const warned: { obj: object; msg: string }[] = [];
    const logger = { info: () => undefined, warn: (obj: object, msg: string) => warned.push({ obj, msg }) };
    const failing = { refresh: () => Promise.reject(new Error("connection reset")) };
    const [srv, url] = await listen(createAdminHandler({ token: TOKEN, overrides: store, cache: failing, logger }));
    try {
      const r = await call(url, "POST", "/v1/admin/keys/api/user_id=9/block", { token: TOKEN, body: {} });
      expect(r.status).toBe(200);
      expect(await store.get("api", "user_id=9")).toBeDefined();
      expect(warned).toHaveLength(1);
      expect(warned[0]?.msg).toMatch(/stored.*not yet applied/);
      expect((warned[0]?.obj as { err?: Error }).err?.message).toBe("connection reset");
      expect(JSON.stringify(warned[0]?.obj)).toMatch(/"action":"block"/);
    } finally {
      await new Promise((r) => srv.close(r));
    }
  });

  it("an empty token turns the API off: 404 even with a matching header", async () => {
    expect((await call(offBase, "GET", "/v1/admin/overrides", { token: "" })).status).toBe(404);
    expect((await call(offBase, "GET", "/v1/admin/overrides", { token: TOKEN })).status).toBe(404);
  });
});
