import { readFileSync } from "node:fs";
import { LineCounter, parseDocument } from "yaml";
import { positionOf } from "./positions.js";
import { RulesError, type Rules } from "./rules.js";
import { compileRules } from "./schema.js";

/**
 * Reads, parses and validates a rules file (YAML; JSON is YAML too).
 * @throws RulesError naming the file and every problem (YAML syntax errors with line:column)
 * @example const rules = loadRulesFile("examples/rules.yaml");
 */
export function loadRulesFile(file: string): Rules {
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
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true, lineCounter: lines });
  if (doc.errors.length > 0) {
    throw new RulesError(
      file,
      doc.errors.map((e) => ({ path: "", message: (e.message.split("\n")[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, "") })),
      doc.errors.map((e) => (e.linePos ? { line: e.linePos[0].line, col: e.linePos[0].col } : undefined)),
    );
  }
  try {
    return compileRules(doc.toJS(), file);
  } catch (e) {
    if (!(e instanceof RulesError) || e.positions.length > 0) throw e;
    throw new RulesError(
      e.file,
      e.issues,
      e.issues.map((i) => positionOf(doc, lines, i.path)),
    );
  }
}
