/**
 * The service with its overrides in SQLite on a disk that fills up (a 256 KiB tmpfs of the test's
 * own): admin writes past the space are answered 503 "the overrides database failed: database or
 * disk is full" (never a crash, never a dropped connection), decisions go on with every override
 * written before, and once there is room again writes work and apply. Needs root (mount); as
 * anyone else it skips with one loud line (CI runs as root, so there it runs).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, writeRules } from "../overrides-support.js";
import { startServiceProcess, type ServiceProc } from "../support.js";

const TOKEN = "disk-full-admin-token-0123456789";
const root = process.getuid?.() === 0;
if (!root) {
  const why = "the SQLite disk-full test mounts a small tmpfs, which needs root";
  if (process.env.CI === "true") throw new Error(`${why}, and CI=true: run the tests as root there`);
  process.stderr.write(`\n!!! SKIPPING the SQLite disk-full test: ${why} (run the tests as root, as CI does, to run it).\n\n`);
}

describe.skipIf(!root)("SQLite overrides on a disk that fills up", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "rk-disk-full-"));
  const disk = path.join(dir, "disk");
  let svc: ServiceProc;

  beforeAll(async () => {
    mkdirSync(disk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", disk]);
    svc = await startServiceProcess(
      ["--config", writeRules(dir), "--no-watch", "--overrides", `sqlite:${path.join(disk, "overrides.db")}`, "--admin-token", TOKEN],
      { RATEKEEPER_ADMIN_TOKEN: "", RATEKEEPER_OVERRIDES: "" },
    );
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    try {
      execFileSync("umount", [disk]);
    } catch {
      // not mounted (the mount failed)
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const put = (user: string, body: unknown) =>
    call(svc.base, "PUT", `/v1/admin/overrides/api/${encodeURIComponent(`user_id=${user}`)}`, { token: TOKEN, body });
  const check = async (user: string) => {
    const r = await call(svc.base, "POST", "/v1/check", { body: { domain: "api", descriptors: [[{ key: "user_id", value: user }]] } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as { allowed: boolean; statuses: { limit: number | null }[] };
  };

  it("a full disk: 503 naming it, decisions go on; room again: writes work", async () => {
    expect((await put("blocked-one", { policy: "blocked" })).status).toBe(201);
    const note = "x".repeat(900);
    let full: { status: number; body: any } | undefined;
    let written = 0;
    for (let i = 0; i < 2000 && full === undefined; i++) {
      const r = await put(`u${i}`, { limits: [{ algorithm: "fixed-window", limit: 7, window: "1m" }], note });
      if (r.status === 201) written++;
      else full = r;
    }
    expect(full, "the 256 KiB disk never filled").toBeDefined();
    expect(full?.status, JSON.stringify(full?.body)).toBe(503);
    expect(full?.body.message).toMatch(/^the overrides database failed: .*(disk is full|SQLITE_FULL)/);
    expect(written).toBeGreaterThan(0);
    // Decisions never needed the disk: every override written before still applies.
    expect((await check("blocked-one")).allowed).toBe(false);
    expect((await check("u0")).statuses[0]?.limit).toBe(7);
    expect((await check(`u${written - 1}`)).statuses[0]?.limit).toBe(7);
    expect((await check("nobody")).statuses[0]?.limit).toBe(100);
    expect(svc.proc.exitCode, svc.lines.slice(-40).join("\n")).toBeNull();

    execFileSync("mount", ["-o", "remount,size=8m", disk]);
    const after = await put("after", { limits: [{ algorithm: "fixed-window", limit: 9, window: "1m" }] });
    expect(after.status, JSON.stringify(after.body)).toBe(201);
    expect((await check("after")).statuses[0]?.limit).toBe(9);
    expect((await call(svc.base, "GET", "/healthz")).status).toBe(200);
  }, 120_000);
});
