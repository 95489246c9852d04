/**
 * The service with its overrides in a real PostgreSQL, under admin write load: more concurrent
 * writes than the pool has connections, and every one of its connections killed
 * (pg_terminate_backend) again and again while writes run. The service must neither deadlock
 * nor crash, and must write again once PostgreSQL lets it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  call,
  createTestDatabase,
  pgQuery,
  PG_ADMIN_URL,
  postgresTestMode,
  tempDir,
  writeRules,
  type TestDatabase,
} from "../overrides-support.js";
import { startServiceProcess, type ServiceProc } from "../support.js";

const pgMode = await postgresTestMode();
const TOKEN = "hostile-admin-token-0123456789";
/** The store's default pool size (PostgresOverrideStoreOptions.maxConnections). */
const POOL = 4;

describe.skipIf(pgMode === "skip")("PostgreSQL overrides under write load and killed connections", () => {
  let db: TestDatabase;
  let svc: ServiceProc;
  const dir = tempDir("hostile-pg");

  beforeAll(async () => {
    db = await createTestDatabase("hostile");
    svc = await startServiceProcess(["--config", writeRules(dir.dir), "--no-watch", "--overrides", db.url, "--admin-token", TOKEN], {
      RATEKEEPER_ADMIN_TOKEN: "",
      RATEKEEPER_OVERRIDES: "",
    });
  });

  afterAll(async () => {
    await svc?.stop();
    await db?.drop();
    dir.remove();
  });

  const put = (key: string, limit: number) =>
    call(svc.base, "PUT", `/v1/admin/overrides/api/${encodeURIComponent(key)}`, {
      token: TOKEN,
      body: { limits: [{ algorithm: "fixed-window", limit, window: "1m" }] },
    });

  it(`${POOL * 4} concurrent admin writes (the pool holds ${POOL}) all succeed`, async () => {
    const rs = await Promise.all(Array.from({ length: POOL * 4 }, (_, i) => put(`user_id=c${i}`, 10 + i)));
    expect(rs.map((r) => `${r.status} ${r.status >= 300 ? JSON.stringify(r.body) : ""}`.trim())).toEqual(rs.map(() => "201"));
    const check = await call(svc.base, "POST", "/v1/check", { body: { domain: "api", descriptors: [[{ key: "user_id", value: "c7" }]] } });
    expect(check.body.statuses[0].limit).toBe(17);
  });

  it("pg_terminate_backend of its connections during concurrent writes: no crash, and writes work after", async () => {
    let stop = false;
    let killed = 0;
    const killer = (async () => {
      for (let round = 0; round < 60 && !stop; round++) {
        const rows = await pgQuery<{ ok: boolean }>(
          PG_ADMIN_URL,
          "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
          [db.name],
        );
        killed += rows.filter((r) => r.ok).length;
        await new Promise((r) => setTimeout(r, 15));
      }
    })();
    const statuses = new Map<number, number>();
    const writers = Array.from({ length: POOL * 2 }, async (_, w) => {
      for (let i = 0; i < 25 && svc.proc.exitCode === null; i++) {
        const r = await put(`user_id=w${w}-${i}`, 5).catch(() => ({ status: 0 }));
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      }
    });
    await Promise.all(writers);
    stop = true;
    await killer;
    expect(killed).toBeGreaterThan(0);
    expect(svc.proc.exitCode, `the service exited:\n${svc.lines.slice(-80).join("\n")}`).toBeNull();
    expect(svc.proc.signalCode).toBeNull();
    // Every answer was a success or a clean error (never a dropped connection: status 0).
    for (const s of statuses.keys()) expect([200, 201, 500, 503]).toContain(s);
    // PostgreSQL is left alone now: the next writes succeed and the checks see them.
    const after = await Promise.all(Array.from({ length: POOL * 2 }, (_, i) => put(`user_id=after${i}`, 40 + i)));
    expect(after.map((r) => r.status)).toEqual(after.map(() => 201));
    const check = await call(svc.base, "POST", "/v1/check", {
      body: { domain: "api", descriptors: [[{ key: "user_id", value: "after3" }]] },
    });
    expect(check.body.statuses[0].limit).toBe(43);
    expect((await fetch(`${svc.base}/healthz`)).status).toBe(200);
  });
});
