/**
 * `ratekeeper --help` promises that `ratekeeper <command> --help` shows a command's flags; for the
 * commands of two words (`config check`, `overrides import|export`) a user types the first word
 * with `--help`, or alone, to see what follows it. Both answer the group's commands.
 */
import { describe, expect, it } from "vitest";
import { runMain } from "./cli-in-process.js";

describe("help for a command's first word", () => {
  it("overrides --help lists overrides import and overrides export, exit 0", async () => {
    for (const flag of ["--help", "-h"]) {
      const r = await runMain(["overrides", flag]);
      expect(r.code, flag).toBe(0);
      expect(r.stderr, flag).toBe("");
      expect(r.stdout, flag).toMatch(/^usage: ratekeeper overrides <command> \[flags\]\n/);
      expect(r.stdout, flag).toMatch(/\n {2}overrides import FILE\|-\s+import overrides from JSON lines/);
      expect(r.stdout, flag).toMatch(/\n {2}overrides export \[FILE\]\s+write every live override/);
      expect(r.stdout, flag).not.toMatch(/\n {2}serve\b/);
      expect(r.stdout, flag).toMatch(/ratekeeper overrides <command> --help shows the command's flags\.\n$/);
    }
  });

  it("config --help lists config check, exit 0", async () => {
    const r = await runMain(["config", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: ratekeeper config <command> \[flags\]\n/);
    expect(r.stdout).toMatch(/\n {2}config check PATH\.\.\.\s+validate rules files/);
  });

  it("the first word alone prints the same on stderr, exit 2 (as ratekeeper alone)", async () => {
    const r = await runMain(["overrides"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^ratekeeper overrides: name a command\n\nusage: ratekeeper overrides <command> \[flags\]\n/);
    expect(r.stderr).toMatch(/\n {2}overrides export \[FILE\]/);
  });

  it("an unknown second word names it and lists the group's commands, exit 2", async () => {
    const r = await runMain(["overrides", "purge"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^ratekeeper: unknown command "overrides purge"\n\nusage: ratekeeper overrides <command> \[flags\]\n/);
  });

  it("serve --help names the environment variable of every flag that has one: HOST too", async () => {
    const r = await runMain(["serve", "--help"]);
    expect(r.stdout).toMatch(/--host ADDR\s+interface to listen on \[env HOST, default 0\.0\.0\.0\]/);
  });

  it("a whole command's --help is unchanged", async () => {
    const r = await runMain(["overrides", "export", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: ratekeeper overrides export \[FILE\] \[flags\]\n/);
  });
});
