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

const files = new Map<string, string>();
const cache = new Map<string, LoadedScript>();

/** The text of `scripts/<name>.lua`, read once per process. */
function readScript(name: string): string {
  const hit = files.get(name);
  if (hit !== undefined) return hit;
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
  files.set(name, source);
  return source;
}

const SECTION = /^--\[\[@if ([a-z-]+)\]\]\n([\s\S]*?)^--\[\[@end\]\]\n/gm;

/**
 * `scripts/<name>.lua` built with only the `--[[@if <section>]] ... --[[@end]]` blocks named in
 * `sections`, and its SHA1. Lua creates a closure for every `local function` each time a script
 * runs, so a limiter's script carries only the algorithms it uses (measured: about 1-2 us of Redis
 * CPU per call saved for a fixed window; docs/benchmarks/redis.md). Cached per variant.
 */
export function loadScript(name: string, sections: readonly string[]): LoadedScript {
  const wanted = [...new Set(sections)].sort();
  const id = `${name}:${wanted.join(",")}`;
  const hit = cache.get(id);
  if (hit) return hit;
  const source = readScript(name).replace(SECTION, (_m, section: string, body: string) => (wanted.includes(section) ? body : ""));
  const loaded = { name: id, source, sha: createHash("sha1").update(source).digest("hex") };
  cache.set(id, loaded);
  return loaded;
}

/** The script sections an algorithm needs (see the `--[[@if]]` blocks of ratekeeper.lua). */
export const SECTIONS_OF: Readonly<Record<string, readonly string[]>> = {
  "fixed-window": ["pair", "fixed-window"],
  "sliding-log": ["sliding-log"],
  "sliding-window": ["sliding-window"],
  "token-bucket": ["pair", "bucket"],
  "leaky-bucket": ["pair", "bucket"],
  gcra: ["pair", "bucket"],
};
