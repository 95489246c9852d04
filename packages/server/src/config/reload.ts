/**
 * Hot reload of the rules file, built for files that change under a running service in every
 * way operators change them: editors (truncate, write, rename), tools that write a file in
 * several parts, symlinks (`rules.yaml -> /etc/ratekeeper/v7.yaml`) and Kubernetes ConfigMap
 * volumes (`rules.yaml -> ..data/rules.yaml`, where `..data` is a symlink swapped atomically to a
 * new timestamped directory on every update).
 *
 * A change is applied only when all of these hold:
 * - the file has been quiet for `settleMs`: no change event, and a modification time at least that
 *   old (so a file written in two parts with a pause shorter than that is never applied half-way);
 * - it is no larger than `maxBytes` (a larger one is refused without being read);
 * - it parsed whole and compiled (in a worker thread: parsing is about a second per megabyte of
 *   YAML, and the event loop keeps answering /healthz and checks meanwhile);
 * - it did not change again while it was parsed (then the newer text is parsed instead);
 * - it has at least one rule or named policy, unless `allowEmpty` (a file truncated to nothing
 *   parses as "no rules", which would lift every limit).
 * Anything else keeps the last good rules in force and is reported once through `onError`.
 */
import { existsSync, readFileSync, realpathSync, statSync, watch, type FSWatcher, type Stats } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { parseRules } from "./load.js";
import type { ParseReply } from "./parse-worker.js";
import { RulesError, type Rules } from "./rules.js";

/** Options of {@link watchRules}. */
export interface WatchRulesOptions {
  /** Called with the new rules after a good change. */
  onReload: (rules: Rules) => void;
  /** Called when a change is refused (bad, too large, empty, unreadable); the last good rules stay. */
  onError: (error: Error) => void;
  /** Told when a changed file starts being parsed, for logs. */
  onLoading?: ((info: { readonly file: string; readonly bytes: number }) => void) | undefined;
  /** How long the file must have been quiet before it is read, in ms. @default 2000 */
  settleMs?: number | undefined;
  /** The largest rules file read, in bytes. @default 4194304 (4 MiB) */
  maxBytes?: number | undefined;
  /** Apply a file with no rules and no named policies. @default false */
  allowEmpty?: boolean | undefined;
  /**
   * Also look for a change this often, in ms, in case the platform's file events missed one
   * (network file systems, some container runtimes). `0` turns it off. @default 30000
   */
  pollIntervalMs?: number | undefined;
}

/** Defaults of {@link WatchRulesOptions}, for the CLI's help and the docs. */
export const RELOAD_DEFAULTS = { settleMs: 2000, maxBytes: 4 * 1024 * 1024, pollIntervalMs: 30_000 } as const;

const WORKER = new URL("./parse-worker.js", import.meta.url);

/**
 * Reloads the rules file when it changes (see the module comment for when a change applies).
 * Watches the directory of the path given and that of the file it resolves to (symlinks
 * followed), re-resolving after every change.
 * @returns a function that stops watching
 * @example const stop = watchRules("rules.yaml", { onReload: (r) => service.setRules(r), onError: (e) => log(e) });
 */
export function watchRules(file: string, options: WatchRulesOptions): () => void {
  const settleMs = options.settleMs ?? RELOAD_DEFAULTS.settleMs;
  const maxBytes = options.maxBytes ?? RELOAD_DEFAULTS.maxBytes;
  const pollMs = options.pollIntervalMs ?? RELOAD_DEFAULTS.pollIntervalMs;
  const inWorker = existsSync(fileURLToPath(WORKER));
  const watchers = new Map<string, FSWatcher>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  /** What is in force: the file's identity and text when it was applied. */
  let applied: { sig: string; text: string } | undefined;
  /** The identity of the last state refused, so a bad file is reported once. */
  let refused: string | undefined;
  let job: { worker: Worker | undefined; sig: string } | undefined;

  try {
    applied = { sig: signature(statSync(file)), text: readFileSync(file, "utf8") };
  } catch {
    applied = undefined;
  }

  const schedule = (ms: number): void => {
    if (stopped) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(check, Math.max(ms, 1));
    timer.unref?.();
  };

  /** Watches the directories of the path and of the file it resolves to now. */
  const arm = (): void => {
    const dirs = new Set([dirname(resolve(file))]);
    try {
      dirs.add(dirname(realpathSync(file)));
    } catch {
      // Not there (yet): the path's own directory is watched; the next check re-resolves.
    }
    for (const [d, w] of watchers) {
      if (!dirs.has(d)) {
        w.close();
        watchers.delete(d);
      }
    }
    for (const d of dirs) {
      if (watchers.has(d)) continue;
      try {
        const w = watch(d, { persistent: false }, () => schedule(settleMs));
        // A watched directory removed (an old ConfigMap generation): drop it; checks re-arm.
        w.on("error", () => {
          w.close();
          watchers.delete(d);
        });
        watchers.set(d, w);
      } catch {
        // Gone already; the poll and the next event elsewhere re-arm.
      }
    }
  };

  const refuse = (sig: string, message: string): void => {
    refused = sig;
    options.onError(new RulesError(file, [{ path: "", message }]));
  };

  const apply = (sig: string, text: string, rules: Rules): void => {
    if (!options.allowEmpty && rules.rules.length === 0 && rules.policies.size === 0 && rules.pools.size === 0) {
      refuse(
        sig,
        "has no rules and no policies: refused, the last good rules stay (a file cut short looks like this; allow it with --allow-empty-rules)",
      );
      return;
    }
    applied = { sig, text };
    refused = undefined;
    options.onReload(rules);
  };

  function check(): void {
    timer = undefined;
    if (stopped) return;
    arm();
    let st: Stats;
    try {
      st = statSync(file);
    } catch (e) {
      const sig = `missing:${(e as NodeJS.ErrnoException).code ?? ""}`;
      if (sig !== refused) refuse(sig, `cannot read: ${(e as Error).message}`);
      return;
    }
    const sig = signature(st);
    if (sig === applied?.sig || sig === refused || sig === job?.sig) return;
    const quietMs = Date.now() - st.mtimeMs;
    if (quietMs >= 0 && quietMs < settleMs) return schedule(settleMs - quietMs);
    if (st.size > maxBytes) return refuse(sig, `is ${st.size} bytes, over the ${maxBytes}-byte limit (raise it with --max-rules-bytes)`);
    let text: string;
    try {
      text = readFileSync(file, "utf8");
      // Changed while it was read: wait for it to settle again.
      if (signature(statSync(file)) !== sig) return schedule(settleMs);
    } catch (e) {
      return refuse(sig, `cannot read: ${(e as Error).message}`);
    }
    if (text === applied?.text) {
      applied = { sig, text };
      return;
    }
    parse(sig, text);
  }

  function parse(sig: string, text: string): void {
    void job?.worker?.terminate();
    options.onLoading?.({ file, bytes: Buffer.byteLength(text) });
    if (!inWorker) {
      // Running from the TypeScript sources (tests, tsx): no compiled worker to start.
      job = undefined;
      let rules: Rules;
      try {
        rules = parseRules(text, file);
      } catch (e) {
        refused = sig;
        options.onError(e as Error);
        return;
      }
      apply(sig, text, rules);
      return;
    }
    const worker = new Worker(WORKER, { workerData: { text, file } });
    const mine = { worker, sig };
    job = mine;
    const done = (): boolean => {
      void worker.terminate();
      if (job !== mine) return false; // superseded by a newer change
      job = undefined;
      if (stopped) return false;
      // Changed again while it was parsed: parse the newer text once it settles.
      let now: string;
      try {
        now = signature(statSync(file));
      } catch {
        now = "";
      }
      if (now !== sig) {
        schedule(settleMs);
        return false;
      }
      return true;
    };
    worker.once("message", (reply: ParseReply) => {
      if (!done()) return;
      if (reply.ok) apply(sig, text, reply.rules);
      else {
        refused = sig;
        options.onError(new RulesError(reply.file, reply.issues, reply.positions));
      }
    });
    worker.once("error", (e) => {
      if (done()) refuse(sig, `could not be parsed: ${e.message}`);
    });
  }

  arm();
  const poll = pollMs > 0 ? setInterval(() => timer === undefined && job === undefined && check(), pollMs) : undefined;
  poll?.unref?.();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    if (poll) clearInterval(poll);
    for (const w of watchers.values()) w.close();
    watchers.clear();
    void job?.worker?.terminate();
    job = undefined;
  };
}

/**
 * Refuses a rules file larger than `maxBytes` before it is read (at start; a reload checks the
 * same bound).
 * @throws RulesError naming the file, its size and the bound
 */
export function checkRulesSize(file: string, maxBytes: number = RELOAD_DEFAULTS.maxBytes): void {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    return; // the loader reports an unreadable file in its own words
  }
  if (size > maxBytes) {
    throw new RulesError(file, [
      { path: "", message: `is ${size} bytes, over the ${maxBytes}-byte limit (raise it with --max-rules-bytes)` },
    ]);
  }
}

/** A file's identity and version: a rename over it, a symlink swap or a write all change it. */
function signature(st: Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
}
