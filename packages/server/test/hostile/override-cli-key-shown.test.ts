/**
 * The override CLI names an override's key on stderr: `overrides import --config` in a warning
 * (FILE:LINE: warning: domain/key: ...), `overrides export` in the line of a row it skips. A key
 * may hold any character a descriptor value can (a header Envoy copies): a newline or a terminal
 * escape in it must not start a line of its own (a forged `FILE:LINE: ...`) nor reach the
 * terminal raw. Such a key is shown quoted, as JSON; a key of printable characters as it is.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import Database from "better-sqlite3";
import { runMain } from "../cli-in-process.js";
import { sqliteWithEditedRow } from "../overrides-support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-key-shown-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const RULES = `domain: d
descriptors:
  - key: heavy
    cost: 5
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;
// Quoted: JSON's escapes, and \u escapes for what JSON leaves as it is (C1, the separators).
const SHOWN = String.raw`"d/heavy=a\nforged.jsonl:7: bad line\u001b[2J\u009b2J\u2028"`;
const limit3 = { limits: [{ algorithm: "fixed-window", limit: 3, window: "1m" }] };
const KEY = "heavy=a\nforged.jsonl:7: bad line\u001b[2J\u009b2J\u2028";

describe("a key with a newline or a terminal escape, named on stderr by the override CLI", () => {
  it("overrides import --config: the warning stays one line, the key quoted", async () => {
    const rules = path.join(dir, "rules.yaml");
    const file = path.join(dir, "o.jsonl");
    writeFileSync(rules, RULES);
    writeFileSync(file, `${JSON.stringify({ domain: "d", key: KEY, ...limit3 })}\n`);
    const r = await runMain(["overrides", "import", file, "--config", rules, "--dry-run", "--overrides", "sqlite:x.db"]);
    expect(r.code, r.stderr).toBe(0);
    expect([...r.stderr].filter((c) => "\u001b\u009b\u2028".includes(c))).toEqual([]);
    expect(r.stderr.split("\n").filter((l) => l.includes("forged"))).toEqual([
      `${file}:1: warning: ${SHOWN}: rule d/heavy costs 5 a request, more than this override could ever admit (at most 3): this key matches that rule, so every check of it is denied, except a check that sends a limit with the descriptor (Envoy's route config), which the override decides at the client's cost alone`,
    ]);
  });

  it("overrides export: the line of a row it skips stays one line, the key quoted", async () => {
    const db = path.join(dir, "edited.db");
    await sqliteWithEditedRow(db, "{oops");
    const sql = new Database(db);
    sql.prepare("UPDATE ratekeeper_overrides SET key = ? WHERE key = 'k=a'").run(KEY);
    sql.close();
    const r = await runMain(["overrides", "export", "--overrides", `sqlite:${db}`]);
    expect(r.code, r.stderr).toBe(0);
    expect([...r.stderr].filter((c) => "\u001b\u009b\u2028".includes(c))).toEqual([]);
    expect(r.stderr.split("\n").filter((l) => l.includes("forged"))).toEqual([
      `overrides export: skipped ${SHOWN}: its stored policy is not one the library takes (limits: Invalid input: expected array, received string); fix or delete that row`,
    ]);
  });
});
