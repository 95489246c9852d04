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
 *   YAML, and the event loop keeps answering /healthz and checks meanwhile), within the time and
 *   heap that `maxBytes` allows (parse-budget.ts: a hostile file is stopped, not parsed for minutes);
 * - it did not change again while it was parsed (then the newer text is parsed instead);
 * - it has at least one rule or named policy, unless `allowEmpty` (a file truncated to nothing
 *   parses as "no rules", which would lift every limit).
 * Anything else keeps the last good rules in force and is reported once through `onError`.
 */
import { realpathSync, statSync, type Stats } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseBudget, type ParseBudget } from "./parse-budget.js";
import { parseOffThread, type ParseTask } from "./parse-thread.js";
import { MAX_RULES_BYTES, tooLarge } from "./read-text.js";
import { RulesError, type Rules } from "./rules.js";
import { fileSignature, readUnchanged, rulesState, SettleWatch } from "./watch.js";

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
  /**
   * The state of the rules in force, taken before they were loaded ({@link rulesState}): a change
   * made since then, while the caller was starting, is applied. @default the state when watching starts
   */
  loadedState?: string | undefined;
  /** @internal The time and heap each parse gets (tests shrink them). @default parseBudget(maxBytes) */
  parseBudget?: ParseBudget | undefined;
}

/** Defaults of {@link WatchRulesOptions}, for the CLI's help and the docs. */
export const RELOAD_DEFAULTS = { settleMs: 2000, maxBytes: MAX_RULES_BYTES, pollIntervalMs: 30_000 } as const;

/**
 * Reloads the rules file when it changes (see the module comment for when a change applies).
 * Watches the directory of the path given and that of the file it resolves to (symlinks
 * followed), re-resolving after every change.
 * @returns a function that stops watching, whose `checkSoon()` checks the file now (after the settle time)
 * @example const stop = watchRules("rules.yaml", { onReload: (r) => service.setRules(r), onError: (e) => log(e) });
 */
export function watchRules(file: string, options: WatchRulesOptions): RulesWatch {
  const watcher = new RulesFileWatcher(file, options);
  return Object.assign(() => watcher.stop(), { checkSoon: () => watcher.checkSoon() });
}

/**
 * Stops watching when called. `checkSoon()` looks at the rules now (once the settle time has
 * passed), as an event would: for SIGHUP, and for file systems whose events do not arrive (the
 * poll then finds changes only every 30 s).
 */
export type RulesWatch = (() => void) & { checkSoon(): void };

/** One rules file under watch: what is in force, what was refused, the parse under way. */
class RulesFileWatcher {
  private readonly maxBytes: number;
  private readonly budget: ParseBudget;
  private readonly watch: SettleWatch;
  /** What is in force: the file's identity and text (when known) when it was applied. */
  private applied: { sig: string; text: string | undefined } | undefined;
  /** The identity of the last state refused, so a bad file is reported once. */
  private refused: string | undefined;
  /** The parse under way, of the file's state `sig`. */
  private job: { task: ParseTask; sig: string } | undefined;

  constructor(
    private readonly file: string,
    private readonly options: WatchRulesOptions,
  ) {
    this.maxBytes = options.maxBytes ?? RELOAD_DEFAULTS.maxBytes;
    this.budget = options.parseBudget ?? parseBudget(this.maxBytes);
    const sig = options.loadedState ?? rulesState(file);
    this.applied = sig === undefined ? undefined : { sig, text: undefined };
    this.watch = new SettleWatch({
      check: () => this.check(),
      busy: () => this.job !== undefined,
      settleMs: options.settleMs ?? RELOAD_DEFAULTS.settleMs,
      pollMs: options.pollIntervalMs ?? RELOAD_DEFAULTS.pollIntervalMs,
    });
    this.arm();
    // Look once now: the file may have changed since `loadedState` (no event will say so).
    this.watch.later();
  }

  stop(): void {
    this.watch.stop();
    this.job?.task.cancel();
    this.job = undefined;
  }

  checkSoon(): void {
    if (!this.watch.stopped) this.watch.later();
  }

  /** Watches the directories of the path and of the file it resolves to now. */
  private arm(): void {
    const dirs = new Set([dirname(resolve(this.file))]);
    try {
      dirs.add(dirname(realpathSync(this.file)));
    } catch {
      // Not there (yet): the path's own directory is watched; the next check re-resolves.
    }
    this.watch.arm(dirs);
  }

  private check(): void {
    if (this.watch.stopped) return;
    this.arm();
    let st: Stats;
    try {
      st = statSync(this.file);
    } catch (e) {
      const sig = `missing:${(e as NodeJS.ErrnoException).code ?? ""}`;
      if (sig !== this.refused) this.refuse(sig, this.unreadable(e));
      return;
    }
    const sig = fileSignature(st);
    if (sig === this.applied?.sig || sig === this.refused || sig === this.job?.sig) return;
    if (this.watch.settling(st.mtimeMs)) return;
    if (st.size > this.maxBytes) return this.refuse(sig, tooLarge(this.file, st.size, this.maxBytes));
    let text: string | undefined;
    try {
      text = readUnchanged(this.file, sig, this.maxBytes);
      if (text === undefined) return this.watch.later();
    } catch (e) {
      return this.refuse(sig, e instanceof RulesError ? e : this.unreadable(e));
    }
    if (text === this.applied?.text) {
      this.applied = { sig, text };
      return;
    }
    this.parse(sig, text);
  }

  /** Parses `text` (the file's state `sig`) off the event loop, in place of a parse under way. */
  private parse(sig: string, text: string): void {
    this.job?.task.cancel();
    this.options.onLoading?.({ file: this.file, bytes: Buffer.byteLength(text) });
    const mine = { task: parseOffThread(text, this.file, this.budget), sig };
    this.job = mine;
    mine.task.rules.then(
      (rules) => {
        if (this.parsed(mine)) this.apply(sig, text, rules);
      },
      (e: unknown) => {
        if (this.parsed(mine)) this.refuse(sig, e as Error);
      },
    );
  }

  /**
   * A parse is over: whether its answer still counts (not superseded by a newer change, not
   * stopped, the file unchanged meanwhile; if it changed, the newer text is parsed once it settles).
   */
  private parsed(job: { task: ParseTask; sig: string }): boolean {
    if (this.job !== job) return false; // superseded by a newer change
    this.job = undefined;
    if (this.watch.stopped) return false;
    let now: string;
    try {
      now = fileSignature(statSync(this.file));
    } catch {
      now = "";
    }
    if (now !== job.sig) {
      this.watch.later();
      return false;
    }
    return true;
  }

  private unreadable(e: unknown): RulesError {
    return new RulesError(this.file, [{ path: "", message: `cannot read: ${(e as Error).message}` }]);
  }

  /** Keeps the last good rules: `error` is reported once for the file's state `sig`. */
  private refuse(sig: string, error: Error): void {
    this.refused = sig;
    this.options.onError(error);
  }

  private apply(sig: string, text: string, rules: Rules): void {
    if (!this.options.allowEmpty && rules.rules.length === 0 && rules.policies.size === 0 && rules.pools.size === 0) {
      const message =
        "has no rules and no policies: refused, the last good rules stay (a file cut short looks like this; allow it with --allow-empty-rules)";
      return this.refuse(sig, new RulesError(this.file, [{ path: "", message }]));
    }
    this.applied = { sig, text };
    this.refused = undefined;
    this.options.onReload(rules);
  }
}
