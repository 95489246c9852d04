import { readFileSync, watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
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

/** Options of {@link watchRules}. */
export interface WatchRulesOptions {
  /** Called with the new rules after a good change. */
  onReload: (rules: Rules) => void;
  /** Called when a changed file is bad; the last good rules stay in force. */
  onError: (error: Error) => void;
  /**
   * Waits this long after the last change event before reloading: editors write a file in
   * several steps (truncate, write, rename), each firing an event.
   * @default 200
   */
  debounceMs?: number;
}

/**
 * Reloads the rules file when it changes. Watches the directory, not the file, so an editor's
 * write-to-temp-then-rename (which replaces the inode) is still seen; and ignores a change that
 * leaves the text as it was.
 * @returns a function that stops watching
 */
export function watchRules(file: string, options: WatchRulesOptions): () => void {
  const debounceMs = options.debounceMs ?? 200;
  const name = basename(file);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let lastText: string | undefined;
  try {
    lastText = readFileSync(file, "utf8");
  } catch {
    lastText = undefined;
  }
  const reload = (): void => {
    timer = undefined;
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (e) {
      options.onError(new RulesError(file, [{ path: "", message: `cannot read: ${(e as Error).message}` }]));
      return;
    }
    if (text === lastText) return;
    lastText = text;
    try {
      options.onReload(parseRules(text, file));
    } catch (e) {
      options.onError(e as Error);
    }
  };
  const watcher: FSWatcher = watch(dirname(file), { persistent: false }, (_event, changed) => {
    if (changed !== null && changed !== name) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(reload, debounceMs);
    timer.unref?.();
  });
  watcher.on("error", (e) => options.onError(e));
  return () => {
    if (timer) clearTimeout(timer);
    watcher.close();
  };
}
