/**
 * makeFolder racing another process making the same folder (two services, or serve and an
 * import, starting at once on a fresh `sqlite:./data/overrides.db`): a folder missing when
 * looked at can exist when made. Node's recursive mkdir, which makeFolder replaced, took that
 * EEXIST as done; makeFolder must too. The race is played by an existsSync that answers "missing"
 * for a folder another process has just made.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";

const raced = new Set<string>();
vi.mock("node:fs", async (importOriginal) => {
  const fs = await importOriginal<typeof import("node:fs")>();
  const existsSync = (p: string): boolean => {
    if (!raced.has(p)) return fs.existsSync(p);
    raced.delete(p);
    fs.mkdirSync(p, { recursive: true }); // the other process, between the look and the mkdir
    return false;
  };
  return { ...fs, existsSync, default: { ...fs, existsSync } };
});
const { makeFolder } = await import("../src/make-folder.js");

const dir = mkdtempSync(path.join(tmpdir(), "rk-make-folder-race-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("makeFolder racing another process", () => {
  it("a folder made by someone else between the look and the mkdir is fine (a parent and the folder itself)", () => {
    const parent = path.join(dir, "data");
    const deep = path.join(parent, "overrides");
    raced.add(parent);
    raced.add(deep);
    makeFolder(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
  });
});
