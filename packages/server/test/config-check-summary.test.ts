/**
 * `ratekeeper config check`'s line for a good file counts what the file holds, concurrency pools
 * included: a file of pools only (`concurrency:`) is a valid rules file that serve starts on, and
 * must not read as empty ("0 domains, 0 rules, 0 named policies").
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runMain } from "./cli-in-process.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-check-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function check(yaml: string) {
  const file = path.join(dir, "rules.yaml");
  writeFileSync(file, yaml);
  const { code, stdout, stderr } = await runMain(["config", "check", file]);
  return { code, out: (stdout + stderr).replace(file, "FILE") };
}

describe("config check's summary", () => {
  it("counts concurrency pools", async () => {
    const r = await check("concurrency:\n  reports: { limit: 10, lease: 2m }\n  uploads: { limit: 3 }\n");
    expect(r.code).toBe(0);
    expect(r.out).toBe("FILE: ok (0 domains, 0 rules, 0 named policies, 2 concurrency pools)\n");
  });

  it("says nothing of pools when there are none", async () => {
    const r = await check("policies:\n  login: { algorithm: gcra, limit: 5, window: 1m }\n");
    expect(r.out).toBe("FILE: ok (0 domains, 0 rules, 1 named policies)\n");
  });
});
