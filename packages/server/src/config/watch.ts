/**
 * What the rules reloads (reload.ts for a file, reload-dir.ts for a directory) share: the
 * watchers of the directories where a change can show up, and the timer that runs a check once
 * things are quiet, with a poll in case the platform's file events missed one; and how a file's
 * version is told apart.
 */
import { watch, type FSWatcher, type Stats } from "node:fs";

/** `fs.watch` on a set of directories, re-armed with the set of the moment. */
export class DirWatchers {
  private readonly watchers = new Map<string, FSWatcher>();

  /** @param onChange called on any event in a watched directory */
  constructor(private readonly onChange: () => void) {}

  /** Watches exactly `dirs`: stops watching the others and starts on the new ones. */
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

/** Runs `check` once after a delay (each `schedule` replaces the last), and every `pollMs` while idle. */
export class CheckTimer {
  /** Set by {@link CheckTimer.stop}: nothing is scheduled any more. */
  stopped = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly poll: ReturnType<typeof setInterval> | undefined;

  /**
   * @param pollMs how often to check anyway; 0: never
   * @param busy a check is under way (a parse): the poll skips its turn
   */
  constructor(
    private readonly check: () => void,
    pollMs: number,
    busy: () => boolean,
  ) {
    this.poll = pollMs > 0 ? setInterval(() => this.timer === undefined && !busy() && this.fire(), pollMs) : undefined;
    this.poll?.unref?.();
  }

  /** Checks in `ms` (at least 1), instead of when it was going to. */
  schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fire(), Math.max(ms, 1));
    this.timer.unref?.();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.poll) clearInterval(this.poll);
  }

  private fire(): void {
    this.timer = undefined;
    this.check();
  }
}

/** A file's identity and version: a rename over it, a symlink swap or a write all change it. */
export function fileSignature(st: Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
}
