import { statSync } from "node:fs";
import { mergeRules, rulesFilesIn } from "./load-dir.js";
import { isMap, isScalar, LineCounter, parseDocument, visit, type Document } from "yaml";
import { positionOf } from "./positions.js";
import { RulesError, type Rules } from "./rules.js";
import { compileRules } from "./compile.js";
import { isEnvoyForm } from "./schema.js";
import { readAsGoYaml } from "./go-yaml.js";
import { MAX_RULES_BYTES, readRulesText } from "./read-text.js";

/** Options of {@link loadRulesFile}. */
export interface LoadRulesOptions {
  /** A directory: merge a domain found in several files (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`). @default false */
  mergeDomains?: boolean | undefined;
  /** The largest file read, in bytes (a directory: each of its files); a larger one is refused unread. @default 4194304 (4 MiB) */
  maxBytes?: number | undefined;
  /**
   * Accept rules with no domain, policy or pool (an empty file or directory, which would limit
   * nothing: refused otherwise, at start and on reload alike). @default false
   */
  allowEmpty?: boolean | undefined;
}

/**
 * Reads, parses and validates a rules file (YAML; JSON is YAML too), in ratekeeper's form or
 * envoyproxy/ratelimit's (one domain per file), or a directory of them (see load-dir.ts).
 * @throws RulesError naming the file and every problem (YAML syntax errors with line:column)
 * @example const rules = loadRulesFile("examples/rules.yaml");
 */
export function loadRulesFile(file: string, options: LoadRulesOptions = {}): Rules {
  const rules = loadPath(file, options);
  if (options.allowEmpty !== true) refuseEmpty(rules, file);
  return rules;
}

/** {@link loadRulesFile} without the emptiness check (each file of a directory is checked as part of the whole). */
function loadPath(file: string, options: LoadRulesOptions): Rules {
  let dir = false;
  try {
    dir = statSync(file).isDirectory();
  } catch {
    // reported below, as any unreadable file
  }
  if (dir)
    return mergeRules(
      file,
      rulesFilesIn(file).map((f) => loadPath(f, { maxBytes: options.maxBytes })),
      options.mergeDomains === true,
    );
  return parseRules(readRulesText(file, options.maxBytes ?? MAX_RULES_BYTES).text, file);
}

/**
 * Rules with no domain, policy or pool (an empty file or directory, a mistyped
 * RUNTIME_SUBDIRECTORY) would limit nothing: refused, at start, by `config check` and on reload.
 * @throws RulesError naming the path
 */
export function refuseEmpty(rules: Rules, file: string): void {
  if (rules.domains.size + rules.rules.length + rules.policies.size + rules.pools.size > 0) return;
  throw new RulesError(file, [{ path: "", message: "has no domain, policy or pool: refused (allow it with --allow-empty-rules)" }]);
}

/** Like {@link loadRulesFile}, from text already read. */
export function parseRules(text: string, file: string): Rules {
  const lines = new LineCounter();
  // Merge keys (`<<: *base`) merge, as in envoyproxy/ratelimit's YAML reader (yaml.v2).
  // Duplicate keys are found by duplicateKeys below: the library's own check (uniqueKeys)
  // compares each key with every other of its map, minutes for a map of 100,000 keys.
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: false, lineCounter: lines, merge: true });
  if (doc.errors.length > 0) {
    throw new RulesError(
      file,
      doc.errors.map((e) => ({ path: "", message: (e.message.split("\n")[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, "") })),
      doc.errors.map((e) => (e.linePos ? { line: e.linePos[0].line, col: e.linePos[0].col } : undefined)),
    );
  }
  duplicateKeys(doc, lines, file);
  readAsGoYaml(doc);
  let js: unknown;
  try {
    js = doc.toJS();
  } catch (e) {
    // An alias bomb ("Excessive alias count"), a bad merge: the file's fault, named as such.
    throw new RulesError(file, [{ path: "", message: (e as Error).message }]);
  }
  const envoyForm = isEnvoyForm(js);
  try {
    return compileRules(js, file);
  } catch (e) {
    if (!(e instanceof RulesError) || e.positions.length > 0) throw e;
    throw new RulesError(
      e.file,
      e.issues,
      // A file in envoyproxy/ratelimit's form was read as `domains[0]`: its paths start there.
      e.issues.map((i) => positionOf(doc, lines, envoyForm ? i.path.replace(/^domains\[0\]\.?/, "") : i.path)),
    );
  }
}

/**
 * Refuses a map with a key twice (as the YAML library's `uniqueKeys` and envoyproxy/ratelimit's
 * yaml.v2 do), in one pass per map.
 * @throws RulesError naming the line and column of each repeated key
 */
function duplicateKeys(doc: Document, lines: LineCounter, file: string): void {
  const at: { line: number; col: number }[] = [];
  visit(doc, {
    Map(_, map) {
      if (!isMap(map)) return;
      const seen = new Set<unknown>();
      for (const { key } of map.items) {
        if (!isScalar(key)) continue;
        if (seen.has(key.value)) at.push(lines.linePos(key.range?.[0] ?? 0));
        seen.add(key.value);
      }
    },
  });
  if (at.length > 0)
    throw new RulesError(
      file,
      at.map(() => ({ path: "", message: "Map keys must be unique" })),
      at,
    );
}
