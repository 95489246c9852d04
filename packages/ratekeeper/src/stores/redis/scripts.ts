import { createHash } from "node:crypto";
import { scriptSource, SECTIONS_OF, type FastConsts } from "./script-source.js";

export { SECTIONS_OF };

/** A Lua script and its SHA1 (computed from the text at load, never typed by hand). */
export interface LoadedScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

const cache = new Map<string, LoadedScript>();

/**
 * `scripts/<name>.lua` with only the sections named in `sections` (see script-source.ts), and its
 * SHA1 for EVALSHA; with `consts`, the fast path's limit constants written in (script-source.ts). The text comes from lua-sources.ts, generated from the .lua files
 * (tools/embed-lua.mjs), so nothing is read from disk. Cached per variant.
 */
export function loadScript(name: string, sections: readonly string[], consts?: FastConsts): LoadedScript {
  const { name: id, source } = scriptSource(name, sections, consts);
  const hit = cache.get(id);
  if (hit) return hit;
  const loaded = { name: id, source, sha: createHash("sha1").update(source).digest("hex") };
  cache.set(id, loaded);
  return loaded;
}
