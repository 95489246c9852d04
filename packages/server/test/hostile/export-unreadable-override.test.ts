/**
 * `ratekeeper overrides export` of a database holding a row whose stored policy is not a policy (a
 * hand edit: af5dd59 reads it as limits that are the text itself) wrote that row's raw text as its
 * `limits`, and `overrides import` of the export then refused that line, and with it the whole file:
 * a backup that cannot be restored. Export now leaves such a row out, naming its domain and key on
 * stderr with what the library says of it (the service ignores that row too: its key is decided by
 * its rule), and what it writes imports back as is.
 */
import { writeFileSync } from "node:fs";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { runMain } from "../cli-in-process.js";
import { sqliteWithEditedRow, tempDir } from "../overrides-support.js";

const tmp = tempDir("export-unreadable");
afterAll(() => tmp.remove());

describe("export of a database with a row that is not a policy", () => {
  it.each([
    ["not JSON", "{oops"],
    ["JSON of another shape", '{"limits": 7}'],
  ])("(%s) leaves it out with a warning naming it, and the export imports back", async (_what, text) => {
    const db = tmp.file(`o-${text.length}.db`);
    await sqliteWithEditedRow(db, text);
    const out = await runMain(["overrides", "export", "--overrides", `sqlite:${db}`]);
    expect(out.code, out.stderr).toBe(0);
    expect(
      out.stdout
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { key: string }).key),
    ).toEqual(["k=b"]);
    expect(out.stderr).toMatch(
      /^overrides export: skipped d\/k=a: its stored policy is not one the library takes \(limits: .*\); fix or delete that row\n/,
    );
    expect(out.stderr).toMatch(/overrides export: 1 overrides from .*; 1 unreadable row skipped\n$/);

    const file = tmp.file(`export-${text.length}.jsonl`);
    writeFileSync(file, out.stdout);
    const back = await runMain(["overrides", "import", file, "--overrides", `sqlite:${tmp.file(`back-${text.length}.db`)}`]);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toMatch(/1 overrides written/);
  });
});

describe("export of a row that fails on another field than its policy", () => {
  it("names that field, not the policy (a note longer than import takes)", async () => {
    const db = tmp.file("o-note.db");
    await sqliteWithEditedRow(db, '{"limits":[{"algorithm":"fixed-window","limit":1,"window":"1m"}]}');
    const edit = new Database(db);
    edit.prepare("UPDATE ratekeeper_overrides SET note = ? WHERE key = 'k=a'").run("x".repeat(2000));
    edit.close();
    const out = await runMain(["overrides", "export", "--overrides", `sqlite:${db}`]);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).toMatch(
      /^overrides export: skipped d\/k=a: import would refuse it \(note: must be at most 1024 characters\); fix or delete that row\n/,
    );
  });
});
