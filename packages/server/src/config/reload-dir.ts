/**
 * Hot reload of a directory of rules files (envoyproxy/ratelimit's runtime layout,
 * `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config`), as files are added, changed or removed, with the
 * safety of the single-file reload (reload.ts) applied to the directory as a whole:
 * - it is read once every file has been quiet for `settleMs` (no change event, and every file's
 *   modification time at least that old), so a file written in parts is never applied half-way;
 * - every file is at most `maxBytes` (a larger one is refused without being read);
 * - every file parsed whole and compiled (each in a worker thread, as reload.ts does; unchanged
 *   files are not parsed again), and the files merged without a duplicate domain (or with
 *   `mergeDomains`, a duplicate descriptor);
 * - nothing changed while they were read and parsed (then the newer state is read instead);
 * - no file is empty (no domain, policy or pool: a file cut to nothing), and the whole has at
 *   least one rule or policy, unless `allowEmpty`.
 * Anything else keeps the last good rules and is reported once through `onError`.
 *
 * Symlink swaps are followed: files are compared by what they resolve to, and the watched
 * directories include the targets of symlinked files (a Kubernetes ConfigMap's `..data`) and
 * the parent of every symlinked directory on the path (a `RUNTIME_ROOT` such as
 * `/srv/runtime_data/current -> v7`, swapped by the deploy); a poll catches missed events.
 */
import { lstatSync, readFileSync, realpathSync, statSync, watch, type FSWatcher, type Stats } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { mergeRules, rulesFilesIn } from "./load-dir.js";
import { parseRules } from "./load.js";
import type { ParseReply } from "./parse-worker.js";
import { RELOAD_DEFAULTS, type WatchRulesOptions } from "./reload.js";
import { RulesError, type Rules } from "./rules.js";

/** Options of {@link watchRulesDir}: those of the single-file reload, and how domains merge. */
export interface WatchRulesDirOptions extends WatchRulesOptions {
  /** Merge a domain split over several files (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`). @default false */
  mergeDomains?: boolean | undefined;
}

const WORKER = new URL("./parse-worker.js", import.meta.url);

/** One file of the directory as last seen. */
interface Seen {
  readonly path: string;
  readonly sig: string;
  readonly mtimeMs: number;
  readonly size: number;
}

/** A file read and compiled. */
interface Parsed {
  readonly sig: string;
  readonly rules: Rules;
}

/**
 * Reloads the rules when a file of `dir` (or below it) is added, changed or removed.
 * @returns a function that stops watching
 * @example const stop = watchRulesDir("/srv/runtime/ratelimit/config", { onReload: (r) => svc.setRules(r), onError: log });
 */
export function watchRulesDir(dir: string, options: WatchRulesDirOptions): () => void {
  const settleMs = options.settleMs ?? RELOAD_DEFAULTS.settleMs;
  const maxBytes = options.maxBytes ?? RELOAD_DEFAULTS.maxBytes;
  const pollMs = options.pollIntervalMs ?? RELOAD_DEFAULTS.pollIntervalMs;
  const inWorker = statSafe(fileURLToPath(WORKER)) !== undefined;
  const watchers = new Map<string, FSWatcher>();
  /** Compiled files by path, kept while their signature holds. */
  const parsed = new Map<string, Parsed>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  let busy = false;
  let appliedSig: string | undefined;
  let refusedSig: string | undefined;

  try {
    appliedSig = signatureOf(snapshot(dir));
  } catch {
    appliedSig = undefined;
  }

  const schedule = (ms: number): void => {
    if (stopped) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => void check(), Math.max(ms, 1));
    timer.unref?.();
  };

  const arm = (files: readonly Seen[]): void => {
    const dirs = watchedDirs(dir, files);
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
        w.on("error", () => {
          w.close();
          watchers.delete(d);
        });
        watchers.set(d, w);
      } catch {
        // Gone already: the poll and the next check re-arm.
      }
    }
  };

  const refuse = (sig: string, e: Error): void => {
    refusedSig = sig;
    options.onError(e);
  };

  async function check(): Promise<void> {
    timer = undefined;
    if (stopped) return;
    // A change seen while files are parsed: look again once they are.
    if (busy) return schedule(settleMs);
    let files: Seen[];
    try {
      files = snapshot(dir);
    } catch (e) {
      arm([]);
      const sig = `unreadable:${(e as NodeJS.ErrnoException).code ?? ""}`;
      if (sig !== refusedSig)
        refuse(sig, new RulesError(dir, [{ path: "", message: `cannot read the directory: ${(e as Error).message}` }]));
      return;
    }
    arm(files);
    const sig = signatureOf(files);
    if (sig === appliedSig || sig === refusedSig) return;
    const quietMs = Date.now() - Math.max(0, ...files.map((f) => f.mtimeMs));
    if (quietMs >= 0 && quietMs < settleMs) return schedule(settleMs - quietMs);
    const big = files.find((f) => f.size > maxBytes);
    if (big)
      return refuse(
        sig,
        new RulesError(big.path, [
          { path: "", message: `is ${big.size} bytes, over the ${maxBytes}-byte limit (raise it with --max-rules-bytes)` },
        ]),
      );
    busy = true;
    try {
      await reload(files, sig);
    } finally {
      busy = false;
    }
  }

  /** Parses what changed, merges, and applies, unless anything changed meanwhile. */
  async function reload(files: readonly Seen[], sig: string): Promise<void> {
    const parts: Rules[] = [];
    const fresh = new Map<string, Parsed>();
    for (const f of files) {
      const had = parsed.get(f.path);
      if (had?.sig === f.sig) {
        fresh.set(f.path, had);
        parts.push(had.rules);
        continue;
      }
      let rules: Rules;
      try {
        const text = readFileSync(f.path, "utf8");
        if (f.sig !== fileSig(statSync(f.path))) return schedule(settleMs); // changed while read
        options.onLoading?.({ file: f.path, bytes: Buffer.byteLength(text) });
        rules = await compile(text, f.path);
      } catch (e) {
        if (stopped) return;
        if (!sameState(sig)) return schedule(settleMs);
        return refuse(sig, e instanceof Error ? e : new Error(String(e)));
      }
      if (stopped) return;
      if (rules.domains.size === 0 && rules.policies.size === 0 && rules.pools.size === 0 && !options.allowEmpty)
        return refuse(
          sig,
          new RulesError(f.path, [
            {
              path: "",
              message: "is empty (no domain, policy or pool): refused, the last good rules stay (a file cut short looks like this)",
            },
          ]),
        );
      fresh.set(f.path, { sig: f.sig, rules });
      parts.push(rules);
    }
    // Changed while parsed: read the newer state once it settles.
    if (!sameState(sig)) return schedule(settleMs);
    let merged: Rules;
    try {
      merged = mergeRules(dir, parts, options.mergeDomains === true);
    } catch (e) {
      return refuse(sig, e as Error);
    }
    if (
      !options.allowEmpty &&
      merged.rules.length === 0 &&
      merged.policies.size === 0 &&
      merged.pools.size === 0 &&
      merged.domains.size === 0
    )
      return refuse(
        sig,
        new RulesError(dir, [
          { path: "", message: "has no rules files left: refused, the last good rules stay (allow it with --allow-empty-rules)" },
        ]),
      );
    parsed.clear();
    for (const [p, x] of fresh) parsed.set(p, x);
    appliedSig = sig;
    refusedSig = undefined;
    options.onReload(merged);
  }

  const sameState = (sig: string): boolean => {
    try {
      return signatureOf(snapshot(dir)) === sig;
    } catch {
      return false;
    }
  };

  const compile = (text: string, file: string): Promise<Rules> =>
    inWorker ? parseInWorker(text, file) : Promise.resolve().then(() => parseRules(text, file));

  try {
    arm(snapshot(dir));
  } catch {
    arm([]);
  }
  const poll = pollMs > 0 ? setInterval(() => timer === undefined && !busy && void check(), pollMs) : undefined;
  poll?.unref?.();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    if (poll) clearInterval(poll);
    for (const w of watchers.values()) w.close();
    watchers.clear();
  };
}

/** The rules files of the directory now, each with the identity of what it resolves to. */
function snapshot(dir: string): Seen[] {
  return rulesFilesIn(dir).map((path) => {
    const st = statSync(path);
    return { path, sig: fileSig(st), mtimeMs: st.mtimeMs, size: st.size };
  });
}

function signatureOf(files: readonly Seen[]): string {
  return files.map((f) => `${f.path}\0${f.sig}`).join("\n");
}

/** A file's identity and version: a rename over it, a symlink swap or a write all change it. */
function fileSig(st: Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
}

function statSafe(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/**
 * The directories whose events can mean a change: the directory and its subdirectories (as the
 * path names them and as they resolve), the directories the files resolve into, and the parent
 * of every symlink on the directory's path.
 */
function watchedDirs(dir: string, files: readonly Seen[]): Set<string> {
  const out = new Set<string>();
  const add = (d: string): void => {
    out.add(d);
    try {
      out.add(realpathSync(d));
    } catch {
      // not there now
    }
  };
  const abs = resolve(dir);
  add(abs);
  for (const f of files) {
    add(dirname(f.path));
    try {
      out.add(dirname(realpathSync(f.path)));
    } catch {
      // removed meanwhile
    }
  }
  for (let p = abs; p !== dirname(p); p = dirname(p)) {
    try {
      if (lstatSync(p).isSymbolicLink()) out.add(dirname(p));
    } catch {
      // a missing part: the poll covers it
    }
  }
  return out;
}

/** Parses one file in a worker thread (parsing YAML is about a second per megabyte). */
function parseInWorker(text: string, file: string): Promise<Rules> {
  return new Promise((resolveRules, reject) => {
    const worker = new Worker(WORKER, { workerData: { text, file } });
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
}
