/**
 * A directory of rules files, read as envoyproxy/ratelimit reads its runtime directory
 * (`RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config`): every file in it and its subdirectories, whatever
 * its extension (its loader reads every file there: a `ratelimit.conf` is a config file, and a
 * Kubernetes ConfigMap key such as `ratelimit` is mounted as a file without one), except dotfiles
 * (editors' swap files, and a ConfigMap volume's `..data` link and `..<timestamp>` directories,
 * which hold the same files again), in name order, each compiled on its own (errors name their
 * file) and then put together. A domain in two files is an error ("duplicate domain"), unless
 * `mergeDomains` (its `MERGE_DOMAIN_CONFIG`): then their descriptors are merged, and the same
 * descriptor in both is an error ("duplicate descriptor composite key").
 */
import { readdirSync, realpathSync, statSync, type Stats } from "node:fs";
import { join } from "node:path";
import { RulesError, type Level, type NamedPolicy, type Rules, type TreeNode } from "./rules.js";

/**
 * The rules files of a directory, in name order (dotfiles and `..data`-style entries skipped).
 * Symlinks are followed; one that leads back into a directory being read (a loop) is refused.
 * @throws RulesError naming the entry that cannot be read (a symlink to nothing, a loop, no permission)
 */
export function rulesFilesIn(dir: string, above: ReadonlySet<string> = new Set()): string[] {
  const real = resolved(dir);
  if (above.has(real)) throw new RulesError(dir, [{ path: "", message: `is a symbolic link loop: it leads back to ${real}` }]);
  const within = new Set(above).add(real);
  const out: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (e) {
    throw new RulesError(dir, [{ path: "", message: `cannot read the directory: ${(e as Error).message}` }]);
  }
  for (const name of names) {
    if (name.startsWith(".")) continue;
    const path = join(dir, name);
    // Loops, not push(...list): spreading 130,000 arguments overflows the stack.
    if (statOf(path).isDirectory()) for (const f of rulesFilesIn(path, within)) out.push(f);
    else out.push(path);
  }
  return out;
}

function statOf(path: string): Stats {
  try {
    return statSync(path);
  } catch (e) {
    throw new RulesError(path, [{ path: "", message: `cannot read: ${(e as Error).message}` }]);
  }
}

function resolved(dir: string): string {
  try {
    return realpathSync(dir);
  } catch (e) {
    throw new RulesError(dir, [{ path: "", message: `cannot read the directory: ${(e as Error).message}` }]);
  }
}

/**
 * Puts the compiled rules of several files together.
 * @throws RulesError naming the file that brings a duplicate
 */
export function mergeRules(dir: string, parts: ReadonlyArray<Rules>, mergeDomains: boolean): Rules {
  const domains = new Map<string, Level>();
  const policies = new Map<string, NamedPolicy>();
  const pools = new Map<string, Rules["pools"] extends ReadonlyMap<string, infer P> ? P : never>();
  const rules: Rules["rules"][number][] = [];
  for (const r of parts) {
    for (const [name, level] of r.domains) {
      const had = domains.get(name);
      if (had === undefined) domains.set(name, level);
      else if (!mergeDomains)
        throw new RulesError(r.source, [
          { path: "domain", message: `duplicate domain '${name}' in config file (set MERGE_DOMAIN_CONFIG=true to merge it)` },
        ]);
      else domains.set(name, mergeLevel(had, level, name, r.source));
    }
    for (const [name, p] of r.policies) {
      if (policies.has(name)) throw new RulesError(r.source, [{ path: `policies.${name}`, message: "duplicate policy name" }]);
      policies.set(name, p);
    }
    for (const [name, p] of r.pools) {
      if (pools.has(name)) throw new RulesError(r.source, [{ path: `concurrency.${name}`, message: "duplicate pool name" }]);
      pools.set(name, p);
    }
    for (const rule of r.rules) rules.push(rule);
  }
  return { source: dir, domains, policies, rules, pools };
}

function mergeLevel(a: Level, b: Level, at: string, file: string): Level {
  const dup = (label: string): never => {
    throw new RulesError(file, [{ path: "descriptors", message: `duplicate descriptor composite key '${at}.${label}'` }]);
  };
  const exact = new Map<string, Map<string, TreeNode>>();
  for (const [k, m] of a.exact) exact.set(k, new Map<string, TreeNode>(m));
  for (const [k, m] of b.exact) {
    let into = exact.get(k);
    if (into === undefined) exact.set(k, (into = new Map<string, TreeNode>()));
    for (const [v, node] of m) {
      if (into.has(v)) dup(`${k}_${v}`);
      into.set(v, node);
    }
  }
  const anyValue = new Map(a.anyValue);
  for (const [k, node] of b.anyValue) {
    if (anyValue.has(k)) dup(k);
    anyValue.set(k, node);
  }
  const wildcards = [...a.wildcards];
  // A set, not a scan of the list per wildcard: the merge runs on the event loop on reload, and
  // two files of 8,000 wildcards each took 13 s to merge with a scan.
  const patterns = new Set(a.wildcards.map((w) => `${w.key}\0${w.parts.join("*")}`));
  for (const w of b.wildcards) {
    const pattern = `${w.key}\0${w.parts.join("*")}`;
    if (patterns.has(pattern)) dup(`${w.key}_${w.parts.join("*")}`);
    patterns.add(pattern);
    wildcards.push(w);
  }
  return { exact, wildcards, anyValue };
}
