import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

/** A Lua script and its SHA1 (computed from the text at load, never typed by hand). */
export interface LoadedScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

/**
 * The .lua files are the source of truth and ship in the package (`files` has "src" and
 * "dist"). From `src/stores/redis/*.ts` (tests, tsx) they sit in `./scripts/`; from the compiled
 * `dist/stores/redis/*.js` they are read from `../../../src/stores/redis/scripts/`, so
 * `tsc -b` needs no copy step and a clean clone works after `npm run build`.
 */
const CANDIDATES = ["./scripts/", "../../../src/stores/redis/scripts/"];

const cache = new Map<string, LoadedScript>();

/** Reads `scripts/<name>.lua` once per process and hashes it. */
export function loadScript(name: string): LoadedScript {
  const hit = cache.get(name);
  if (hit) return hit;
  let source: string | undefined;
  const tried: string[] = [];
  for (const dir of CANDIDATES) {
    const url = new URL(`${dir}${name}.lua`, import.meta.url);
    tried.push(url.pathname);
    try {
      source = readFileSync(url, "utf8");
      break;
    } catch {
      /* try the next place */
    }
  }
  if (source === undefined) throw new Error(`ratekeeper/redis: cannot find ${name}.lua (looked in ${tried.join(", ")})`);
  const loaded = { name, source, sha: createHash("sha1").update(source).digest("hex") };
  cache.set(name, loaded);
  return loaded;
}
