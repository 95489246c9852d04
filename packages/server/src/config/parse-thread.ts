/**
 * Parses and compiles a rules text for the reloads (reload.ts, reload-dir.ts) off the event loop:
 * in a worker thread running parse-worker.ts (parsing YAML is about a second per megabyte, and the
 * service keeps answering meanwhile). Run from the TypeScript sources (tests, tsx) there is no
 * compiled worker to start: the text is parsed in this thread, once the caller has returned.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { parseRules } from "./load.js";
import type { ParseReply } from "./parse-worker.js";
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
 * Starts parsing `text`, the contents of `file` (the name its errors carry).
 * @example const { rules } = parseOffThread(readFileSync(f, "utf8"), f); apply(await rules);
 */
export function parseOffThread(text: string, file: string): ParseTask {
  if (!IN_WORKER) return { rules: Promise.resolve().then(() => parseRules(text, file)), cancel: () => {} };
  const worker = new Worker(WORKER, { workerData: { text, file } });
  const rules = new Promise<Rules>((resolveRules, reject) => {
    worker.once("message", (reply: ParseReply) => {
      void worker.terminate();
      if (reply.ok) resolveRules(reply.rules);
      else reject(new RulesError(reply.file, reply.issues, reply.positions));
    });
    worker.once("error", (e) => {
      void worker.terminate();
      reject(new RulesError(file, [{ path: "", message: `could not be parsed: ${e.message}` }]));
    });
  });
  return { rules, cancel: () => void worker.terminate() };
}
