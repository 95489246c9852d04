import { readFileSync, statSync } from "node:fs";
import { mergeRules, rulesFilesIn } from "./load-dir.js";
import { LineCounter, parseDocument } from "yaml";
import { positionOf } from "./positions.js";
import { RulesError, type Rules } from "./rules.js";
import { compileRules } from "./compile.js";
import { isEnvoyForm } from "./schema.js";
import { readAsGoYaml } from "./go-yaml.js";

/** Options of {@link loadRulesFile}. */
export interface LoadRulesOptions {
  /** A directory: merge a domain found in several files (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`). @default false */
  mergeDomains?: boolean | undefined;
}

/**
 * Reads, parses and validates a rules file (YAML; JSON is YAML too), in ratekeeper's form or
 * envoyproxy/ratelimit's (one domain per file), or a directory of them (see load-dir.ts).
 * @throws RulesError naming the file and every problem (YAML syntax errors with line:column)
 * @example const rules = loadRulesFile("examples/rules.yaml");
 */
export function loadRulesFile(file: string, options: LoadRulesOptions = {}): Rules {
  let dir = false;
  try {
    dir = statSync(file).isDirectory();
  } catch {
    // reported below, as any unreadable file
  }
  if (dir)
    return mergeRules(
      file,
      rulesFilesIn(file).map((f) => loadRulesFile(f)),
      options.mergeDomains === true,
    );
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new RulesError(file, [{ path: "", message: `cannot read: ${(e as Error).message}` }]);
  }
  return parseRules(text, file);
}

/** Like {@link loadRulesFile}, from text already read. */
export function parseRules(text: string, file: string): Rules {
  const lines = new LineCounter();
  // Merge keys (`<<: *base`) merge, as in envoyproxy/ratelimit's YAML reader (yaml.v2).
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true, lineCounter: lines, merge: true });
  if (doc.errors.length > 0) {
    throw new RulesError(
      file,
      doc.errors.map((e) => ({ path: "", message: (e.message.split("\n")[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, "") })),
      doc.errors.map((e) => (e.linePos ? { line: e.linePos[0].line, col: e.linePos[0].col } : undefined)),
    );
  }
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
