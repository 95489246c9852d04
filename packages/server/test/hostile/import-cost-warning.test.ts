/**
 * `ratekeeper overrides import --config RULES` warns, on stderr, about each override whose limits
 * could never admit one request of what its key costs under those rules (the admin API's
 * `warnings`, transport/override-warnings.ts), and still imports it: exit 0, every line written.
 * Before, an import said nothing, and `--config` was not a flag of it.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runMain } from "../cli-in-process.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-import-warn-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const RULES = `domain: d
descriptors:
  - key: heavy
    cost: 5
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: light
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;
const limit3 = { limits: [{ algorithm: "fixed-window", limit: 3, window: "1m" }] };
const LINES = [
  { domain: "d", key: "heavy=a", ...limit3 },
  { domain: "d", key: "light=a", ...limit3 },
  { domain: "d", key: "heavy=b", policy: "blocked" },
]
  .map((o) => `${JSON.stringify(o)}\n`)
  .join("");

describe("overrides import with the rules", () => {
  for (const dryRun of [false, true]) {
    it(`warns on stderr about an override below its rule's cost, and imports every line${dryRun ? " (dry run)" : ""}`, async () => {
      const rules = path.join(dir, "rules.yaml");
      const file = path.join(dir, "o.jsonl");
      writeFileSync(rules, RULES);
      writeFileSync(file, LINES);
      const db = path.join(dir, `o-${dryRun}.db`);
      const r = await runMain([
        "overrides",
        "import",
        file,
        "--config",
        rules,
        "--overrides",
        `sqlite:${db}`,
        ...(dryRun ? ["--dry-run"] : []),
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(dryRun ? /3 lines valid/ : /3 overrides written/);
      // Beside the progress line ("3 written"), one warning: light=a fits its rule, a block admits nothing by design.
      expect(r.stderr.split("\n").filter((l) => l.includes("warning"))).toEqual([
        `${file}:1: warning: d/heavy=a: rule d/heavy costs 5 a request, more than this override could ever admit (at most 3): this key matches that rule, so every check of it is denied, except a check that sends a limit with the descriptor (Envoy's route config), which the override decides at the client's cost alone`,
      ]);
    });
  }

  it("a rules file that cannot be read is a usage error, and nothing is imported", async () => {
    const file = path.join(dir, "o2.jsonl");
    writeFileSync(file, LINES);
    const r = await runMain([
      "overrides",
      "import",
      file,
      "--config",
      path.join(dir, "none.yaml"),
      "--dry-run",
      "--overrides",
      "sqlite:x.db",
    ]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
  });
});
