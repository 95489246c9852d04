/**
 * Hot reload of a directory of rules files (envoyproxy/ratelimit's runtime layout,
 * `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config`), as files are added, changed or removed, with the
 * safety of the single-file reload (reload.ts) applied to the directory as a whole:
 * - it is read once every file has been quiet for `settleMs` (no change event, and every file's
 *   modification time at least that old), so a file written in parts is never applied half-way;
 * - every file is at most `maxBytes` (a larger one is refused without being read);
 * - every file parsed whole and compiled (each in a worker thread within its own time and heap
 *   budget, as reload.ts does; unchanged files are not parsed again), and the files merged without a duplicate domain (or with
 *   `mergeDomains`, a duplicate descriptor);
 * - nothing changed while they were read and parsed (then the newer state is read instead);
 * - no file is empty (no domain, policy or pool: a file cut to nothing), and the whole has at
 *   least one rule or policy, unless `allowEmpty`.
 * Anything else keeps the last good rules and is reported once through `onError`.
 *
 * Symlink swaps are followed: files are compared by what they resolve to, and the watched
 * directories include the targets of symlinked files (a Kubernetes ConfigMap's `..data`) and
 * the parent of every symlinked directory on the path (a `RUNTIME_ROOT` such as
 * `/srv/runtime_data/current -> v7`, swapped by the deploy), and its parent (the directory
 * removed and made again); a poll catches missed events.
 */
import { lstatSync, realpathSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { mergeRules } from "./load-dir.js";
import { parseBudget, type ParseBudget } from "./parse-budget.js";
import { parseOffThread } from "./parse-thread.js";
import { tooLarge } from "./read-text.js";
import { RELOAD_DEFAULTS, type RulesWatch, type WatchRulesOptions } from "./reload.js";
import { RulesError, type Rules } from "./rules.js";
import { readUnchanged, rulesState, SettleWatch, signatureOf, snapshot, type Seen } from "./watch.js";

/** Options of {@link watchRulesDir}: those of the single-file reload, and how domains merge. */
export interface WatchRulesDirOptions extends WatchRulesOptions {
  /** Merge a domain split over several files (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`). @default false */
  mergeDomains?: boolean | undefined;
}

/** A file read and compiled. */
interface Parsed {
  readonly sig: string;
  readonly rules: Rules;
}

/**
 * Reloads the rules when a file of `dir` (or below it) is added, changed or removed.
 * @returns a function that stops watching, whose `checkSoon()` looks at the directory now (reload.ts's RulesWatch)
 * @example const stop = watchRulesDir("/srv/runtime/ratelimit/config", { onReload: (r) => svc.setRules(r), onError: log });
 */
export function watchRulesDir(dir: string, options: WatchRulesDirOptions): RulesWatch {
  const watcher = new RulesDirWatcher(dir, options);
  return Object.assign(() => watcher.stop(), { checkSoon: () => watcher.checkSoon() });
}

/** One rules directory under watch: what is in force, what was refused, the files compiled. */
class RulesDirWatcher {
  private readonly maxBytes: number;
  private readonly budget: ParseBudget;
  private readonly watch: SettleWatch;
  /** Compiled files by path, kept while their signature holds. */
  private readonly parsed = new Map<string, Parsed>();
  /** A check is reading and parsing. */
  private busy = false;
  private appliedSig: string | undefined;
  private refusedSig: string | undefined;

  constructor(
    private readonly dir: string,
    private readonly options: WatchRulesDirOptions,
  ) {
    this.maxBytes = options.maxBytes ?? RELOAD_DEFAULTS.maxBytes;
    this.budget = options.parseBudget ?? parseBudget(this.maxBytes);
    this.appliedSig = options.loadedState ?? rulesState(dir);
    this.watch = new SettleWatch({
      check: () => void this.check(),
      busy: () => this.busy,
      settleMs: options.settleMs ?? RELOAD_DEFAULTS.settleMs,
      pollMs: options.pollIntervalMs ?? RELOAD_DEFAULTS.pollIntervalMs,
    });
    try {
      this.arm(snapshot(dir));
    } catch {
      this.arm([]);
    }
    // Look once now: the files may have changed since `loadedState` (no event will say so).
    this.watch.later();
  }

  stop(): void {
    this.watch.stop();
  }

  checkSoon(): void {
    if (!this.watch.stopped) this.watch.later();
  }

  private arm(files: readonly Seen[]): void {
    this.watch.arm(watchedDirs(this.dir, files));
  }

  private refuse(sig: string, e: Error): void {
    this.refusedSig = sig;
    this.options.onError(e);
  }

  private async check(): Promise<void> {
    if (this.watch.stopped) return;
    // A change seen while files are parsed: look again once they are.
    if (this.busy) return this.watch.later();
    let files: Seen[];
    try {
      files = snapshot(this.dir);
    } catch (e) {
      this.arm([]);
      // A RulesError names the entry (a symlink to nothing, a loop); anything else, the directory.
      const error =
        e instanceof RulesError
          ? e
          : new RulesError(this.dir, [{ path: "", message: `cannot read the directory: ${(e as Error).message}` }]);
      const sig = `unreadable:${error.message}`;
      if (sig !== this.refusedSig) this.refuse(sig, error);
      return;
    }
    this.arm(files);
    const sig = signatureOf(files);
    if (sig === this.appliedSig || sig === this.refusedSig) return;
    // A loop, not Math.max(...times): spreading 130,000 arguments overflows the stack.
    if (this.watch.settling(files.reduce((newest, f) => Math.max(newest, f.mtimeMs), 0))) return;
    const big = files.find((f) => f.size > this.maxBytes);
    if (big) return this.refuse(sig, tooLarge(big.path, big.size, this.maxBytes));
    this.busy = true;
    try {
      await this.reload(files, sig);
    } finally {
      this.busy = false;
    }
  }

  /** Parses what changed, merges, and applies, unless anything changed meanwhile. */
  private async reload(files: readonly Seen[], sig: string): Promise<void> {
    const fresh = new Map<string, Parsed>();
    for (const f of files) {
      const had = this.parsed.get(f.path);
      const rules = had?.sig === f.sig ? had.rules : await this.compileFile(f, sig);
      if (rules === undefined) return;
      fresh.set(f.path, { sig: f.sig, rules });
    }
    // Changed while parsed: read the newer state once it settles.
    if (!this.sameState(sig)) return this.watch.later();
    let merged: Rules;
    try {
      merged = mergeRules(
        this.dir,
        [...fresh.values()].map((p) => p.rules),
        this.options.mergeDomains === true,
      );
    } catch (e) {
      return this.refuse(sig, e as Error);
    }
    const empty = merged.rules.length === 0 && merged.policies.size === 0 && merged.pools.size === 0 && merged.domains.size === 0;
    if (!this.options.allowEmpty && empty)
      return this.refuse(
        sig,
        new RulesError(this.dir, [
          { path: "", message: "has no rules files left: refused, the last good rules stay (allow it with --allow-empty-rules)" },
        ]),
      );
    this.parsed.clear();
    for (const [p, x] of fresh) this.parsed.set(p, x);
    this.appliedSig = sig;
    this.refusedSig = undefined;
    this.options.onReload(merged);
  }

  /**
   * One changed file read and compiled; undefined when the reload stops here (the file changed
   * while read, or the check was stopped: rescheduled; bad or empty: refused).
   */
  private async compileFile(f: Seen, sig: string): Promise<Rules | undefined> {
    let rules: Rules;
    try {
      const text = readUnchanged(f.path, f.sig, this.maxBytes);
      if (text === undefined) {
        this.watch.later();
        return undefined;
      }
      this.options.onLoading?.({ file: f.path, bytes: Buffer.byteLength(text) });
      rules = await parseOffThread(text, f.path, this.budget).rules;
    } catch (e) {
      if (this.watch.stopped) return undefined;
      if (!this.sameState(sig)) this.watch.later();
      else this.refuse(sig, e instanceof Error ? e : new Error(String(e)));
      return undefined;
    }
    if (this.watch.stopped) return undefined;
    if (rules.domains.size === 0 && rules.policies.size === 0 && rules.pools.size === 0 && !this.options.allowEmpty) {
      const message = "is empty (no domain, policy or pool): refused, the last good rules stay (a file cut short looks like this)";
      this.refuse(sig, new RulesError(f.path, [{ path: "", message }]));
      return undefined;
    }
    return rules;
  }

  private sameState(sig: string): boolean {
    try {
      return signatureOf(snapshot(this.dir)) === sig;
    } catch {
      return false;
    }
  }
}

/**
 * The directories whose events can mean a change: the directory, its parent, and its
 * subdirectories (as the path names them and as they resolve), the directories the files resolve
 * into, and the parent of every symlink on the directory's path.
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
  // Its parent too: the directory removed and made again (a deploy's rm -rf and copy) shows up there.
  out.add(dirname(abs));
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
