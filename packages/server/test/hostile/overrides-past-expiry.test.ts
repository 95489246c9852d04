/**
 * An override whose `expiresAtMs` is already past never applies, and writing it replaces what the
 * store holds for its key (a live block from an old export's stale line, gone). Most often it is
 * a mistake: seconds given for milliseconds (1764300000 is January 1970), or a stale file. So
 * `overrides import` refuses such lines (naming each, nothing written) unless `--skip-expired`,
 * which imports the others and says how many it skipped and where; the admin API answers 400.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../../src/transport/admin.js";
import { openOverrideStore } from "../../src/overrides/open.js";
import { runMain } from "../cli-in-process.js";
import http from "node:http";
import type { AddressInfo } from "node:net";

const dir = mkdtempSync(path.join(tmpdir(), "rk-ovr-past-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const LIVE = '{"domain":"api","key":"user_id=1","policy":"blocked"}';
const LATER = `{"domain":"api","key":"user_id=2","policy":"blocked","expiresAtMs":${Date.now() + 3_600_000}}`;
const SECONDS = '{"domain":"api","key":"user_id=3","policy":"blocked","expiresAtMs":1764300000}'; // seconds: 1970
const STALE = `{"domain":"api","key":"user_id=1","policy":"unlimited","expiresAtMs":${Date.now() - 60_000}}`;

describe("overrides whose expiry is already past", () => {
  it("import refuses them by default: each named, nothing written, exit 1", async () => {
    const file = path.join(dir, "past.jsonl");
    writeFileSync(file, [LIVE, LATER, SECONDS, STALE].join("\n") + "\n");
    const db = `sqlite:${path.join(dir, "a.db")}`;
    const r = await runMain(["overrides", "import", file, "--overrides", db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/past\.jsonl:3: expiresAtMs: already past \(1970-01-21T/);
    expect(r.stderr).toMatch(/milliseconds/);
    expect(r.stderr).toMatch(/past\.jsonl:4: expiresAtMs: already past/);
    // Line 4 is a real millisecond time a minute ago (an override that expired after its export):
    // only line 3 looks like seconds, and only it may say so.
    expect(r.stderr).toMatch(/past\.jsonl:3: .*looks like seconds/);
    expect(r.stderr).not.toMatch(/past\.jsonl:4: .*looks like seconds/);
    expect(r.stderr).toMatch(/2 of 4 lines are bad.*nothing was written/);
    expect(r.stderr).toMatch(/--skip-expired/);
    const out = await runMain(["overrides", "export", "--overrides", db]);
    expect(out.stdout).toBe("");
  });

  it("with other bad lines too, the hint does not promise that --skip-expired imports the rest", async () => {
    const file = path.join(dir, "mixed.jsonl");
    writeFileSync(file, [LIVE, STALE, "{not json"].join("\n") + "\n");
    const db = `sqlite:${path.join(dir, "m.db")}`;
    const r = await runMain(["overrides", "import", file, "--overrides", db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/2 of 3 lines are bad/);
    expect(r.stderr).toMatch(/1 of them expired already/);
    // --skip-expired alone would still refuse the file: line 3 is not JSON.
    expect(r.stderr).not.toMatch(/already; --skip-expired imports the other lines/);
    expect(r.stderr).toMatch(/fix the other 1 bad line.*--skip-expired/);
  });

  it("import --skip-expired writes the others and reports what it skipped", async () => {
    const file = path.join(dir, "past.jsonl");
    const db = `sqlite:${path.join(dir, "b.db")}`;
    const r = await runMain(["overrides", "import", file, "--skip-expired", "--overrides", db]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/2 overrides written/);
    expect(r.stderr).toMatch(/skipped 2 lines whose expiresAtMs is already past \(lines 3, 4\)/);
    const out = await runMain(["overrides", "export", "--overrides", db]);
    // The live block of user_id=1 stands: the stale line did not replace it.
    expect(
      out.stdout
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { key: string; policy: string }).policy),
    ).toEqual(["blocked", "blocked"]);
  });

  it("the admin API answers 400 naming expiresAtMs", async () => {
    const store = await openOverrideStore(`sqlite:${path.join(dir, "c.db")}`);
    const admin = createAdminHandler({ token: "tok-tok-tok-tok-tok", overrides: store });
    const server = http.createServer((req, res) => void admin(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/admin`;
    const headers = { authorization: "Bearer tok-tok-tok-tok-tok", "content-type": "application/json" };
    try {
      for (const [method, p, body] of [
        ["PUT", "/overrides/api/user_id=3", SECONDS],
        ["POST", "/overrides", SECONDS],
        ["POST", "/keys/api/user_id=3/block", '{"expiresAtMs":1764300000}'],
      ] as const) {
        const res = await fetch(url + p, { method, headers, body });
        const json = (await res.json()) as { message: string };
        expect(res.status, `${method} ${p}: ${json.message}`).toBe(400);
        expect(json.message).toMatch(/^expiresAtMs: already past/);
      }
      expect((await store.list()).items).toEqual([]);
    } finally {
      server.close();
      await store.close();
    }
  });
});
