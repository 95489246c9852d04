/**
 * `overrides import --config` warned about every valid line as it was read, though the last line
 * for a (domain, key) wins (overrides/jsonl.ts): a line a later line of the same file replaces is
 * never stored, so its warning described an override that will not exist, and a later line's
 * own warning was shown as well. It now warns only about the line that ends up stored for each key.
 * The store is read back to show which override is there.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteOverrideStore } from "../../src/overrides/sqlite.js";
import { runMain } from "../cli-in-process.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-import-replaced-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const RULES = `domain: d
descriptors:
  - key: heavy
    cost: 5
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;
const limits = (limit: number) => ({ limits: [{ algorithm: "fixed-window", limit, window: "1m" }] });
const LINES = [
  { domain: "d", key: "heavy=a", ...limits(3) }, // replaced by line 3: no warning
  { domain: "d", key: "heavy=b", ...limits(50) }, // replaced by line 4, which is warned about
  { domain: "d", key: "heavy=a", ...limits(50) },
  { domain: "d", key: "heavy=b", ...limits(2) },
  { domain: "d", key: "heavy=c", ...limits(1) }, // replaced by line 6, warned about too
  { domain: "d", key: "heavy=c", ...limits(4) },
]
  .map((o) => `${JSON.stringify(o)}\n`)
  .join("");
const warning = (line: number, key: string, admits: number) =>
  `:${line}: warning: d/${key}: rule d/heavy costs 5 a request, more than this override could ever admit (at most ${admits}): this key matches that rule, so every check of it is denied, except a check that sends a limit with the descriptor (Envoy's route config), which the override decides at the client's cost alone`;

describe("overrides import --config, a key on several lines", () => {
  for (const dryRun of [false, true]) {
    it(`warns only about the line that is stored for it${dryRun ? " (dry run)" : ""}`, async () => {
      const rules = path.join(dir, "rules.yaml");
      const file = path.join(dir, "o.jsonl");
      writeFileSync(rules, RULES);
      writeFileSync(file, LINES);
      const db = path.join(dir, `o-${dryRun}.db`);
      const args = ["overrides", "import", file, "--config", rules, "--overrides", `sqlite:${db}`];
      const r = await runMain([...args, ...(dryRun ? ["--dry-run"] : [])]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr.split("\n").filter((l) => l.includes("warning"))).toEqual([
        file + warning(4, "heavy=b", 2),
        file + warning(6, "heavy=c", 4),
      ]);
      if (dryRun) return;
      const store = new SqliteOverrideStore({ path: db });
      try {
        const stored = (await store.list({ domain: "d" })).items.map((o) => [o.key, o.policy]);
        expect(stored.sort()).toEqual([
          ["heavy=a", limits(50)],
          ["heavy=b", limits(2)],
          ["heavy=c", limits(4)],
        ]);
      } finally {
        await store.close();
      }
    });
  }
});
