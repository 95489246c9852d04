/**
 * Parses and compiles a rules text for the reloads (reload.ts, reload-dir.ts) off the event loop:
 * in a worker thread running parse-worker.ts (parsing YAML is about a second per megabyte, and the
 * service keeps answering meanwhile). The worker is bounded (parse-budget.ts): past its time it is
 * stopped, past its heap V8 stops it; either way the text is refused with a RulesError naming the
 * file, and the service carries on. Run from the TypeScript sources (tests, tsx) there is no
 * compiled worker to start: the text is parsed in this thread, unbounded, once the caller has
 * returned.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { parseRules } from "./load.js";
import { parseBudget, type ParseBudget } from "./parse-budget.js";
import type { ParseReply } from "./parse-worker.js";
import { MAX_RULES_BYTES } from "./read-text.js";
import { RulesError, type Rules } from "./rules.js";

const WORKER = new URL("./parse-worker.js", import.meta.url);
const IN_WORKER = existsSync(fileURLToPath(WORKER));

/** One parse under way. */
export interface ParseTask {
  /** The compiled rules; rejects with a RulesError naming the file (or, parsed in this thread, what the parser threw). */
  readonly rules: Promise<Rules>;
  /** Stops the worker: `rules` then never settles. */
  cancel(): void;
}

/**
 * Starts parsing `text`, the contents of `file` (the name its errors carry), within `budget`.
 * @example const { rules } = parseOffThread(readFileSync(f, "utf8"), f, parseBudget(maxBytes)); apply(await rules);
 */
export function parseOffThread(text: string, file: string, budget: ParseBudget = parseBudget(MAX_RULES_BYTES)): ParseTask {
  if (!IN_WORKER) return { rules: Promise.resolve().then(() => parseRules(text, file)), cancel: () => {} };
  const worker = new Worker(WORKER, { workerData: { text, file }, resourceLimits: { maxOldGenerationSizeMb: budget.heapMb } });
  let over = false;
  let timer: NodeJS.Timeout | undefined;
  const stop = (): void => {
    over = true;
    clearTimeout(timer);
    void worker.terminate();
  };
  const rules = new Promise<Rules>((resolveRules, reject) => {
    const fail = (message: string): void => {
      stop();
      reject(new RulesError(file, [{ path: "", message }]));
    };
    timer = setTimeout(() => fail(tooSlow(budget)), budget.timeoutMs);
    worker.once("message", (reply: ParseReply) => {
      stop();
      if (reply.ok) resolveRules(reply.rules);
      else reject(new RulesError(reply.file, reply.issues, reply.positions));
    });
    worker.once("error", (e: Error & { code?: string }) => {
      if (!over) fail(e.code === "ERR_WORKER_OUT_OF_MEMORY" ? tooBig(budget) : `could not be parsed: ${e.message}`);
    });
    // A worker that ends with neither an answer nor an error would otherwise leave the reload waiting forever.
    worker.once("exit", (code) => {
      if (!over) fail(`could not be parsed: the parser stopped without an answer (exit code ${code})`);
    });
  });
  return { rules, cancel: stop };
}

/** What to look for in a file that overran its budget, and how to give it more. */
const HINT =
  "ordinary rules need a few seconds and about 75 MB per MiB; look for a huge list, deep nesting or many aliases, or split it over a rules directory; the budget grows with --max-rules-bytes";

function tooSlow(b: ParseBudget): string {
  return `took longer than ${+(b.timeoutMs / 1000).toFixed(1)} s to parse: stopped and refused (${HINT})`;
}

function tooBig(b: ParseBudget): string {
  return `needed more than ${b.heapMb} MB of memory to parse: stopped and refused (${HINT})`;
}
