import { readFileSync } from "node:fs";
import { parseDocument } from "yaml";
import { compileRules, RulesError, type Rules } from "./schema.js";

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
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new RulesError(
      file,
      doc.errors.map((e) => ({
        path: e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : "",
        message: (e.message.split("\n")[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, ""),
      })),
    );
  }
  return compileRules(doc.toJS(), file);
}
