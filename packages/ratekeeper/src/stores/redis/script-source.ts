import { LUA_SOURCES } from "./lua-sources.js";

/**
 * The Lua scripts' text, cut to the sections a limiter needs. Pure (no file system, no hashing),
 * so that the HTTP Redis store shares it on runtimes without Node (see ../redis-http/).
 */

/** A script variant before hashing: its cache name and its text. */
export interface ScriptSource {
  readonly name: string;
  readonly source: string;
}

const SECTION = /^--\[\[@if ([a-z-]+)\]\]\n([\s\S]*?)^--\[\[@end\]\]\n/gm;

/**
 * `scripts/<name>.lua` built with only the `--[[@if <section>]] ... --[[@end]]` blocks named in
 * `sections`. Lua creates a closure for every `local function` each time a script runs, so a
 * limiter's script carries only the algorithms it uses (measured: about 1-2 us of Redis CPU per
 * call saved for a fixed window; docs/benchmarks/redis.md).
 * @throws Error when no script has that name
 */
export function scriptSource(name: string, sections: readonly string[], consts?: FastConsts): ScriptSource {
  const text = LUA_SOURCES[name];
  if (text === undefined) throw new Error(`ratekeeper/redis: no script named ${name}.lua`);
  const wanted = [...new Set(sections)].sort();
  let source = text.replace(SECTION, (_m, section: string, body: string) => (wanted.includes(section) ? body : ""));
  if (consts === undefined) return { name: `${name}:${wanted.join(",")}`, source };
  const values = [consts.limit, consts.windowMs, consts.kind, consts.capacity, consts.minTtlMs];
  for (const v of values) {
    if (typeof v === "number" ? !Number.isFinite(v) : !/^[a-zA-Z]$/.test(v))
      throw new Error(`ratekeeper/redis: bad script constant ${String(v)}`);
  }
  const rhs = values.map((v) => (typeof v === "number" ? String(v) : `"${v}"`)).join(", ");
  if (!FAST_CONSTS.test(source)) throw new Error(`ratekeeper/redis: ${name}.lua has no "@fast-consts" line for these sections`);
  source = source.replace(FAST_CONSTS, (_m, lhs: string) => `${lhs}= ${rhs} -- @fast-consts`);
  return { name: `${name}:${wanted.join(",")}:${rhs}`, source };
}

/** The fast path's limit constants, written into ratekeeper.lua's line marked "@fast-consts". */
export interface FastConsts {
  readonly limit: number;
  readonly windowMs: number;
  /** f, n, F, b or s: see ratekeeper.lua's fast path. */
  readonly kind: string;
  readonly capacity: number;
  readonly minTtlMs: number;
}

const FAST_CONSTS = /^(\s*local limit, W, kind, capacity, minTtl )= .* -- @fast-consts$/m;

/** The script sections an algorithm needs (see the `--[[@if]]` blocks of ratekeeper.lua). */
export const SECTIONS_OF: Readonly<Record<string, readonly string[]>> = {
  "fixed-window": ["pair", "fixed-window"],
  "sliding-log": ["sliding-log"],
  "sliding-window": ["sliding-window"],
  "token-bucket": ["pair", "bucket"],
  "leaky-bucket": ["pair", "bucket"],
  gcra: ["pair", "bucket"],
};
