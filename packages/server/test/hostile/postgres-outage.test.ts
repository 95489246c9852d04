/**
 * The service with its overrides in a PostgreSQL of the test's own, which the test freezes
 * (SIGSTOP of every PostgreSQL process), kills (kill -9 of the postmaster) and starts again. While
 * PostgreSQL is gone the service must keep deciding with the overrides it holds (no decision waits
 * on PostgreSQL), answer admin writes with a clean error (or late, once PostgreSQL is back; never
 * a dropped connection), never crash, and afterwards write again and see what other instances
 * wrote meanwhile. postgres-stall.test.ts and postgres-faults.test.ts cover a stalled client and
 * killed connections on the machine's shared PostgreSQL; this one stops the server itself.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresBinDir, startPostgres, type PostgresHandle } from "../../../../test-support/postgres.js";
import { until } from "../../../../test-support/process.js";
import { call, tempDir, writeRules } from "../overrides-support.js";
import { startServiceProcess, type ServiceProc } from "../support.js";

const bin = postgresBinDir();
const TOKEN = "outage-admin-token-0123456789";

describe.skipIf(bin === undefined)("the service while its PostgreSQL is frozen, killed and restarted", () => {
  let pgServer: PostgresHandle;
  let svc: ServiceProc;
  const dir = tempDir("pg-outage");

  beforeAll(async () => {
    pgServer = await startPostgres(bin as string);
    svc = await startServiceProcess(["--config", writeRules(dir.dir), "--no-watch", "--overrides", pgServer.url, "--admin-token", TOKEN], {
      RATEKEEPER_ADMIN_TOKEN: "",
      RATEKEEPER_OVERRIDES: "",
    });
  }, 120_000);

  afterAll(async () => {
    await svc?.stop();
    await pgServer?.stop();
    dir.remove();
  });

  const put = (user: string, limit: number) =>
    call(svc.base, "PUT", `/v1/admin/overrides/api/${encodeURIComponent(`user_id=${user}`)}`, {
      token: TOKEN,
      body: { limits: [{ algorithm: "fixed-window", limit, window: "1m" }] },
    });
  const limitOf = async (user: string): Promise<number> => {
    const r = await call(svc.base, "POST", "/v1/check", { body: { domain: "api", descriptors: [[{ key: "user_id", value: user }]] } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.statuses[0].limit as number;
  };
  const alive = () => {
    expect(svc.proc.exitCode, `the service exited:\n${svc.lines.slice(-60).join("\n")}`).toBeNull();
    expect(svc.proc.signalCode).toBeNull();
  };

  it("SIGSTOP: decisions go on with the overrides held; a write waits and lands once PostgreSQL runs again", async () => {
    expect((await put("vip", 7)).status).toBe(201);
    expect(await limitOf("vip")).toBe(7);
    pgServer.pause();
    try {
      // No decision waits on PostgreSQL: the override held in memory still applies, the rules too.
      for (let i = 0; i < 20; i++) expect(await limitOf("vip")).toBe(7);
      expect(await limitOf("someone")).toBe(100);
      const frozenWrite = put("during-stop", 9);
      await new Promise((r) => setTimeout(r, 500));
      expect(await limitOf("vip")).toBe(7);
      alive();
      pgServer.resume();
      // The write was waiting on its connection, not lost: it completes now.
      const w = await frozenWrite;
      expect(w.status, JSON.stringify(w.body)).toBe(201);
    } finally {
      pgServer.resume();
    }
    await until(async () => (await limitOf("during-stop")) === 9, "the write made while frozen to apply", 100, 100);
    alive();
  }, 120_000);

  it("kill -9: decisions go on, writes fail cleanly and fast; after a restart writes work and another instance's write arrives", async () => {
    const oldPid = pgServer.pid;
    pgServer.pause(); // nothing of the old server must answer between the kill and the restart
    await pgServer.kill9();
    expect(() => process.kill(oldPid, 0)).toThrow(); // the postmaster is gone
    for (let i = 0; i < 20; i++) expect(await limitOf("vip")).toBe(7);
    expect(await limitOf("during-stop")).toBe(9);
    const down = await put("while-down", 11);
    // A store outage, named as one: 503, at once, saying PostgreSQL is unavailable (connection
    // refused; or, when the write went out on a pooled connection the kill had not yet been seen
    // to end, that connection lost): the kind only, never pg's text (store-error-body.test.ts).
    expect(down.status, JSON.stringify(down.body)).toBe(503);
    expect(down.body.message, down.body.message).toMatch(
      /^the overrides database failed: PostgreSQL is unavailable \((ECONNREFUSED|not connected)\)/,
    );
    alive();

    await pgServer.restart();
    await until(async () => (await put("after-restart", 13)).status === 201, "a write to succeed after the restart", 100, 200);
    expect(await limitOf("after-restart")).toBe(13);
    // Nothing was lost with the crash (fsync is off, but the data files outlive the process).
    expect(await limitOf("vip")).toBe(7);
    expect((await call(svc.base, "GET", "/v1/admin/overrides/api/user_id%3Dduring-stop", { token: TOKEN })).status).toBe(200);
    // Another instance writes straight into PostgreSQL through the same store: this service's
    // feed reconnected and catches up (a LISTEN after the restart, or its periodic resync).
    const other = await startServiceProcess(
      ["--config", writeRules(dir.dir), "--no-watch", "--overrides", pgServer.url, "--admin-token", TOKEN],
      {
        RATEKEEPER_ADMIN_TOKEN: "",
        RATEKEEPER_OVERRIDES: "",
      },
    );
    try {
      const r = await call(other.base, "PUT", "/v1/admin/overrides/api/user_id%3Dfrom-other", {
        token: TOKEN,
        body: { limits: [{ algorithm: "fixed-window", limit: 17, window: "1m" }] },
      });
      expect(r.status).toBe(201);
    } finally {
      await other.stop();
    }
    await until(async () => (await limitOf("from-other")) === 17, "the other instance's write to reach this one", 300, 200);
    alive();
  }, 180_000);
});
