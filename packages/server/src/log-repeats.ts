/**
 * Repeated failure lines, counted instead of written. A store outage answered with errors
 * (`--redis-failure throw`: 503 on every request) logged a line per request ("request failed",
 * with the error and its stack): a flood of requests became a flood of lines, the size of the
 * traffic, at the moment the log matters most. A failure's `errorId` is shared by every failure
 * of the same kind for {@link REPEAT_WINDOW_MS} (service/error-id.ts), so a line naming an
 * `errorId` already written with the same message is a repeat: it is counted, and once per
 * interval one line says how many there were, naming that `errorId`. Every id a client is given is
 * in the log, on the full line of the first failure of its kind and on the count of the others.
 */
import type { Logger } from "pino";
import { REPEAT_WINDOW_MS } from "./service/error-id.js";

/** Ids tracked at most: past that, lines are written as they come (each one is a line written anyway). */
const MAX_TRACKED = 10_000;

interface Seen {
  readonly level: string;
  readonly msg: string;
  readonly errorId: string;
  readonly firstMs: number;
  /**
   * Repeats counted since the last line about them, and when that line was. Times (this and
   * `firstMs`) are `performance.now()`'s: a wall clock set back never keeps an id counted.
   */
  count: number;
  sinceMs: number;
}

/**
 * Counts repeats (see the module's comment). {@link repeated} is pino's `logMethod` hook's test;
 * {@link attach} gives it the logger its count lines go to.
 */
export class RepeatedLines {
  private readonly seen = new Map<string, Seen>();
  private logger: Logger | undefined;
  private timer: NodeJS.Timeout | undefined;
  private writing = false;

  constructor(private readonly intervalMs = REPEAT_WINDOW_MS) {}

  attach(logger: Logger): void {
    this.logger = logger;
  }

  /** Whether the call `args` (pino's: fields, message) at `level` repeats a line written: counted, then. */
  repeated(args: unknown[], level: string): boolean {
    const [fields, msg] = args;
    if (this.writing || typeof msg !== "string" || typeof fields !== "object" || fields === null) return false;
    const errorId = (fields as { errorId?: unknown }).errorId;
    if (typeof errorId !== "string") return false;
    const key = `${level} ${errorId} ${msg}`;
    const s = this.seen.get(key);
    if (s !== undefined) {
      s.count++;
      return true;
    }
    if (this.seen.size < MAX_TRACKED) {
      const now = performance.now();
      this.seen.set(key, { level, msg, errorId, firstMs: now, count: 0, sinceMs: now });
      this.timer ??= setInterval(() => this.flush(), this.intervalMs).unref();
    }
    return false;
  }

  /** Writes a count line for each id repeated since its last one; forgets ids no longer repeated. */
  flush(): void {
    const now = performance.now();
    for (const [key, s] of this.seen) {
      if (s.count > 0) this.countLine(s, now);
      else if (now - s.firstMs >= this.intervalMs) this.seen.delete(key);
    }
    if (this.seen.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private countLine(s: Seen, now: number): void {
    const seconds = Math.max(1, Math.round((now - s.sinceMs) / 1000));
    const fields = { errorId: s.errorId, repeats: s.msg, suppressed: s.count, seconds };
    s.count = 0;
    s.sinceMs = now;
    this.writing = true;
    try {
      this.logger?.[s.level as "error"](fields, `${s.msg}: ${fields.suppressed} more like this in the last ${seconds} s (same errorId)`);
    } finally {
      this.writing = false;
    }
  }
}
