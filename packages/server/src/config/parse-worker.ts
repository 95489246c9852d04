/**
 * A worker thread that parses and compiles one rules text, so a large file never stalls the
 * service's event loop (YAML parsing is most of the work: about a second per megabyte). The
 * compiled rules (plain objects, arrays and maps) go back by structured clone; a bad file's
 * problems go back as a RulesError's file and issues.
 */
import { parentPort, workerData } from "node:worker_threads";
import { parseRules } from "./load.js";
import { RulesError, type Rules } from "./rules.js";

/** What the worker is given. */
export interface ParseJob {
  readonly text: string;
  readonly file: string;
}

/** What it answers. */
export type ParseReply =
  | { readonly ok: true; readonly rules: Rules }
  | {
      readonly ok: false;
      readonly file: string;
      readonly issues: RulesError["issues"];
      readonly positions: RulesError["positions"];
      readonly message: string;
    };

const job = workerData as ParseJob;
let reply: ParseReply;
try {
  reply = { ok: true, rules: parseRules(job.text, job.file) };
} catch (e) {
  reply =
    e instanceof RulesError
      ? { ok: false, file: e.file, issues: e.issues, positions: e.positions, message: e.message }
      : { ok: false, file: job.file, issues: [{ path: "", message: (e as Error).message }], positions: [], message: (e as Error).message };
}
parentPort?.postMessage(reply);
