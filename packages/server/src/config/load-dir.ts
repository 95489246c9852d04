/**
 * A directory of rules files, read as envoyproxy/ratelimit reads its runtime directory
 * (`RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config`): every `.yaml`, `.yml` and `.json` file in it and
 * its subdirectories, and every file without an extension (its loader reads every file there, and
 * a Kubernetes ConfigMap key such as `ratelimit` is mounted as one), in name order, each compiled on its own (errors name their file) and then
 * put together. A domain in two files is an error ("duplicate domain"), unless `mergeDomains`
 * (its `MERGE_DOMAIN_CONFIG`): then their descriptors are merged, and the same descriptor in both
 * is an error ("duplicate descriptor composite key").
 */
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { RulesError, type Level, type NamedPolicy, type Rules, type TreeNode } from "./rules.js";

/** The rules files of a directory, in name order (dotfiles and `..data`-style entries skipped). */
export function rulesFilesIn(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    if (name.startsWith(".")) continue;
    const path = join(dir, name);
    const st = statSync(path);
    if (st.isDirectory()) out.push(...rulesFilesIn(path));
    else if (/\.(ya?ml|json)$/i.test(name) || !name.includes(".")) out.push(path);
  }
  return out;
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
    rules.push(...r.rules);
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
  for (const w of b.wildcards) {
    if (wildcards.some((x) => x.key === w.key && x.parts.join("*") === w.parts.join("*"))) dup(`${w.key}_${w.parts.join("*")}`);
    wildcards.push(w);
  }
  return { exact, wildcards, anyValue };
}
