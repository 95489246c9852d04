/**
 * makeFolder: mkdir -p that returns (Node's recursive mkdir spins forever under /proc). Run in a
 * child process with a hard kill, so that a hang fails the test instead of freezing the runner.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { makeFolder } from "../src/make-folder.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-make-folder-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** makeFolder(target) in a child process killed after 20 s: its error code, "ok", or "hung". */
function inChild(target: string): string {
  const src = path.resolve(import.meta.dirname, "../dist/make-folder.js");
  const code = `import { makeFolder } from ${JSON.stringify(src)};
try { makeFolder(${JSON.stringify(target)}); console.log("ok"); } catch (e) { console.log(e.code); }`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], { encoding: "utf8", timeout: 20_000, killSignal: "SIGKILL" });
  return r.signal === "SIGKILL" ? "hung" : r.stdout.trim();
}

describe("makeFolder", () => {
  it("makes a folder and its missing parents; an existing one is fine", () => {
    const deep = path.join(dir, "a", "b", "c");
    makeFolder(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    makeFolder(deep);
    makeFolder(dir);
  });

  it("throws what mkdir says: a file in the way, a dangling symlink", () => {
    const file = path.join(dir, "file");
    writeFileSync(file, "x");
    expect(() => makeFolder(path.join(file, "sub"))).toThrow(expect.objectContaining({ code: "ENOTDIR" }));
    expect(existsSync(path.join(file, "sub"))).toBe(false);
    const link = path.join(dir, "dangling");
    symlinkSync(path.join(dir, "nowhere"), link);
    expect(() => makeFolder(path.join(link, "sub"))).toThrow(expect.objectContaining({ code: "EEXIST" }));
  });

  it.skipIf(!existsSync("/proc/self"))(
    "returns ENOENT under /proc, where Node's recursive mkdir spins forever",
    () => {
      expect(inChild("/proc/ratekeeper-nope/x")).toBe("ENOENT");
    },
    30_000,
  );
});
