/**
 * The overrides commands never create a database they were not asked to fill: `import --dry-run`
 * ("validate only; write nothing") opens no store, and `export` from an SQLite file that does not
 * exist (a mistyped path) is refused instead of creating an empty one and exporting nothing.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runMain } from "./cli-in-process.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-ovr-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const LINE = '{"domain":"api","key":"user_id=42","policy":"blocked","note":"test"}\n';

describe("overrides commands and a database that is not there", () => {
  it("import --dry-run validates and creates neither the folder nor the file", async () => {
    const file = path.join(dir, "good.jsonl");
    writeFileSync(file, LINE);
    const db = path.join(dir, "dry", "overrides.db");
    const r = await runMain(["overrides", "import", file, "--dry-run", "--overrides", `sqlite:${db}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/1 lines valid \(dry run: nothing written\)/);
    expect(existsSync(path.dirname(db))).toBe(false);
  });

  it("import --dry-run still refuses a bad line, exit 1", async () => {
    const file = path.join(dir, "bad.jsonl");
    writeFileSync(file, '{"domain":"api"}\n');
    const r = await runMain(["overrides", "import", file, "--dry-run", "--overrides", `sqlite:${path.join(dir, "dry2", "o.db")}`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/bad\.jsonl:1: key: required/);
  });

  it("export from an SQLite file that does not exist is refused, and creates nothing", async () => {
    const db = path.join(dir, "typo", "overrides.db");
    const r = await runMain(["overrides", "export", "--overrides", `sqlite:${db}`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^ratekeeper overrides export: --overrides: no such SQLite file .*typo.*overrides\.db/);
    expect(existsSync(path.dirname(db))).toBe(false);
  });

  it("import (not a dry run) creates the store, and export then reads it", async () => {
    const file = path.join(dir, "good.jsonl");
    const db = path.join(dir, "real", "overrides.db");
    expect((await runMain(["overrides", "import", file, "--overrides", `sqlite:${db}`])).code).toBe(0);
    const r = await runMain(["overrides", "export", "--overrides", `sqlite:${db}`]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(LINE);
  });
});
