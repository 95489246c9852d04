/**
 * test-support/outside.ts itself: outside programs are found on PATH only (never at a fixed path
 * such as /usr/sbin/nginx), a missing one skips with one loud line naming what to install, and
 * under CI=true it fails instead. Run in child processes with a PATH of our choosing.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const HELPER = fileURLToPath(new URL("../../../test-support/outside.ts", import.meta.url));
const dir = mkdtempSync(path.join(tmpdir(), "rk-outside-"));
const fake = path.join(dir, "rk-fake-tool");
writeFileSync(fake, "#!/bin/sh\nexit 0\n");
chmodSync(fake, 0o755);
writeFileSync(path.join(dir, "rk-not-executable"), "");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function find(name: string, pathVar: string, ci: boolean) {
  const code =
    `import(${JSON.stringify(HELPER)}).then((m) => { ` +
    `const a = m.findBinary(${JSON.stringify(name)}, "Fake", "the fake tool"); m.findBinary(${JSON.stringify(name)}, "Fake", "the fake tool"); ` +
    `console.log("found=" + a); })`;
  return spawnSync(process.execPath, ["--import", "tsx", "-e", code], {
    encoding: "utf8",
    env: { ...process.env, PATH: `${pathVar}${path.delimiter}${path.dirname(process.execPath)}`, CI: ci ? "true" : "" },
    timeout: 60_000,
  });
}

describe("findBinary (test-support/outside.ts)", () => {
  it("finds an executable in a PATH folder", () => {
    expect(find("rk-fake-tool", dir, false).stdout).toContain(`found=${fake}`);
  });

  it("does not look outside PATH, and skips with exactly one loud line naming what to install", () => {
    const r = find("rk-fake-tool", "/nonexistent", false);
    expect(r.stdout).toContain("found=undefined");
    const lines = r.stderr.split("\n").filter((l) => l.includes("SKIPPING"));
    expect(lines).toEqual([
      "!!! SKIPPING Fake tests: rk-fake-tool not found on PATH. Install the fake tool to run them; under CI=true they fail instead.",
    ]);
  });

  it("ignores a file that is not executable", () => {
    expect(find("rk-not-executable", dir, false).stdout).toContain("found=undefined");
  });

  it("fails under CI=true", () => {
    const r = find("rk-fake-tool", "/nonexistent", true);
    expect(r.status).not.toBe(0);
    expect(r.stdout).not.toContain("found=");
    expect(r.stderr).toContain("rk-fake-tool not found on PATH, and CI=true: the Fake tests must run under CI. Install the fake tool.");
  });
});
