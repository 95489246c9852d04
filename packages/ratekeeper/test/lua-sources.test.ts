/**
 * lua-sources.ts carries the Lua scripts as module text (runtimes without a file system load it);
 * the .lua files are the source of truth. This fails when a script changed and
 * `node packages/ratekeeper/tools/embed-lua.mjs` was not rerun.
 */
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { LUA_SOURCES } from "../src/stores/redis/lua-sources.js";

const DIR = new URL("../src/stores/redis/scripts/", import.meta.url);

describe("lua-sources.ts", () => {
  it("holds exactly the text of every scripts/*.lua (else run: node packages/ratekeeper/tools/embed-lua.mjs)", () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith(".lua"));
    expect(Object.keys(LUA_SOURCES).sort()).toEqual(files.map((f) => f.slice(0, -4)).sort());
    for (const f of files) expect([f, LUA_SOURCES[f.slice(0, -4)]]).toEqual([f, readFileSync(new URL(f, DIR), "utf8")]);
  });
});
