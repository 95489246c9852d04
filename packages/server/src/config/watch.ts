/**
 * What the rules reloads (reload.ts for a file, reload-dir.ts for a directory) share: watching
 * the directories where a change can show up, waiting until things have been quiet for the
 * settle time before a check (so a file written in parts is never read half-way), a poll in case
 * the platform's file events missed one; how a file's version is told apart, and reading a file
 * only if no write changed it meanwhile.
 */
import { statSync, watch, type FSWatcher, type Stats } from "node:fs";
import { rulesFilesIn } from "./load-dir.js";
import { readRulesText } from "./read-text.js";

/** Options of {@link SettleWatch}. */
export interface SettleWatchOptions {
  /** Looks at the file or directory and applies or refuses what it finds. */
  readonly check: () => void;
  /** A check is under way (a parse): the poll skips its turn. */
  readonly busy: () => boolean;
  /** How long things must have been quiet before a check, in ms. */
  readonly settleMs: number;
  /** How often to check anyway, in ms; 0: never. */
  readonly pollMs: number;
}

/**
 * Runs a reload's check once things have been quiet for `settleMs`: after an event in a watched
 * directory (each event restarts the wait), after a change too recent to read, and every
 * `pollMs` while idle.
 */
export class SettleWatch {
  private isStopped = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly poll: ReturnType<typeof setInterval> | undefined;
  private readonly dirs: DirWatchers;

  constructor(private readonly options: SettleWatchOptions) {
    const { pollMs, busy } = options;
    this.poll = pollMs > 0 ? setInterval(() => this.timer === undefined && !busy() && this.fire(), pollMs) : undefined;
    this.poll?.unref?.();
    this.dirs = new DirWatchers(() => this.later());
  }

  /** Set by {@link SettleWatch.stop}: nothing is checked any more. */
  get stopped(): boolean {
    return this.isStopped;
  }

  /** Watches exactly `dirs` for events: stops watching the others and starts on the new ones. */
  arm(dirs: ReadonlySet<string>): void {
    this.dirs.arm(dirs);
  }

  /** Checks once `settleMs` has passed, instead of when it was going to. */
  later(): void {
    this.schedule(this.options.settleMs);
  }

  /**
   * Whether a change made at `mtimeMs` is too recent to read (younger than `settleMs`); if so,
   * the check runs again once it is that old. A time in the future (a clock set back) counts as
   * settled, as it would never become old enough.
   */
  settling(mtimeMs: number): boolean {
    const quietMs = Date.now() - mtimeMs;
    if (quietMs < 0 || quietMs >= this.options.settleMs) return false;
    this.schedule(this.options.settleMs - quietMs);
    return true;
  }

  stop(): void {
    this.isStopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.poll) clearInterval(this.poll);
    this.dirs.close();
  }

  /** Checks in `ms` (at least 1), instead of when it was going to. */
  private schedule(ms: number): void {
    if (this.isStopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fire(), Math.max(ms, 1));
    this.timer.unref?.();
  }

  private fire(): void {
    this.timer = undefined;
    this.options.check();
  }
}

/** `fs.watch` on a set of directories, re-armed with the set of the moment. */
class DirWatchers {
  private readonly watchers = new Map<string, FSWatcher>();

  /** @param onChange called on any event in a watched directory */
  constructor(private readonly onChange: () => void) {}

  arm(dirs: ReadonlySet<string>): void {
    for (const [d, w] of this.watchers) {
      if (!dirs.has(d)) {
        w.close();
        this.watchers.delete(d);
      }
    }
    for (const d of dirs) {
      if (this.watchers.has(d)) continue;
      try {
        const w = watch(d, { persistent: false }, () => this.onChange());
        // A watched directory removed (an old ConfigMap generation): drop it; checks re-arm.
        w.on("error", () => {
          w.close();
          this.watchers.delete(d);
        });
        this.watchers.set(d, w);
      } catch {
        // Gone already: the poll and the next check re-arm.
      }
    }
  }

  close(): void {
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }
}

/**
 * Reads the file at `path` last seen in the state `sig` (at most `maxBytes`, as UTF-8:
 * read-text.ts); undefined when it changed while it was read (a write under way: the caller waits
 * for it to settle again, never using half a file).
 * @throws RulesError naming the file: gone, unreadable, grown past `maxBytes`, not UTF-8
 */
export function readUnchanged(path: string, sig: string, maxBytes: number): string | undefined {
  const { text } = readRulesText(path, maxBytes);
  let now: string;
  try {
    now = fileSignature(statSync(path));
  } catch {
    return undefined; // gone meanwhile: the next check says so
  }
  return now === sig ? text : undefined;
}

/** A file's identity and version: a rename over it, a symlink swap or a write all change it. */
export function fileSignature(st: Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
}

/**
 * The state of a rules file or directory now (every file's identity and version), for a reload's
 * `loadedState`: taken before the rules are loaded, so a change made after is applied.
 * Undefined when it cannot be read (the next check reports it).
 * @example const state = rulesState(path); const rules = loadRulesFile(path); watchRules(path, { loadedState: state, ... });
 */
export function rulesState(path: string): string | undefined {
  try {
    return statSync(path).isDirectory() ? signatureOf(snapshot(path)) : fileSignature(statSync(path));
  } catch {
    return undefined;
  }
}

/** One file of a rules directory as last seen. */
export interface Seen {
  readonly path: string;
  readonly sig: string;
  readonly mtimeMs: number;
  readonly size: number;
}

/** The rules files of a directory now, each with the identity of what it resolves to. */
export function snapshot(dir: string): Seen[] {
  return rulesFilesIn(dir).map((path) => {
    const st = statSync(path);
    return { path, sig: fileSignature(st), mtimeMs: st.mtimeMs, size: st.size };
  });
}

/** A directory's state: every file's path and signature. */
export function signatureOf(files: readonly Seen[]): string {
  return files.map((f) => `${f.path}\0${f.sig}`).join("\n");
}
