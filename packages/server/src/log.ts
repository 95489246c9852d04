import { pino, type Logger } from "pino";

export type { Logger };

const LEVELS = new Set(["trace", "debug", "info", "warn", "error", "fatal", "silent"]);

/**
 * A log level as pino names it, from any case and logrus's names too (envoyproxy/ratelimit's
 * `LOG_LEVEL`: `WARN`, `warning`, `panic`); undefined when it is not one.
 * @example logLevel("WARNING") // "warn"
 */
export function logLevel(text: string | undefined): string | undefined {
  const l = (text ?? "").trim().toLowerCase();
  const named = l === "warning" ? "warn" : l === "panic" ? "fatal" : l;
  return LEVELS.has(named) ? named : undefined;
}

/**
 * Structured JSON logs (one object per line, to stdout) with pino. Level from `LOG_LEVEL` (see
 * {@link logLevel}; not a level: info).
 * Nothing is logged per decision at `info`: the hot path stays quiet; metrics count decisions.
 * @default level "info"
 * @example const log = createLogger(); log.info({ port: 8080 }, "listening");
 */
export function createLogger(level = process.env.LOG_LEVEL): Logger {
  return pino(
    { level: logLevel(level) ?? "info", base: { service: "ratekeeper" }, timestamp: pino.stdTimeFunctions.isoTime },
    stdoutDestination(),
  );
}

/** What pino writes the lines to. */
interface Destination {
  write(line: string): boolean;
}

/**
 * Stdout, written synchronously. pino's default destination writes asynchronously and, at exit,
 * flushes the rest synchronously; on a stdout pipe whose reader is gone that flush retries EPIPE
 * every 100 ms for good, so a SIGTERM stopped the service but never ended the process. A
 * synchronous write meets EPIPE at once. The service logs a few lines, never one per decision, so
 * writing them synchronously costs nothing on the hot path.
 *
 * A service that cannot log keeps deciding. pino re-emits any error of its destination but EPIPE:
 * with no listener, an uncaught exception (a closed terminal's EIO on the line saying SIGHUP was
 * heard took the service down). Most errors can clear: a full disk freed (ENOSPC), a quota
 * raised. sonic-boom keeps a line it could not write and tries it again, before the new one, at
 * the next write, so logging resumes by itself; while it cannot, it holds at most its high-water
 * mark (16 KiB: a write then answers false) and one line more, and further lines are dropped, not
 * buffered without end. Two errors never clear, and lines are dropped from then on: a pipe with no
 * reader (EPIPE), and stdout closed (EBADF: fd 1 may be reused by a file the process opens next,
 * which must never receive log lines).
 */
function stdoutDestination(): Destination {
  const dest = pino.destination({ dest: 1, sync: true });
  let gone = false;
  // Whether what sonic-boom holds (lines it could not write) reached its high-water mark.
  let full = false;
  dest.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE" || e.code === "EBADF") gone = true;
  });
  return {
    write(line) {
      if (gone) return true;
      // An empty write tries the held lines again: the new line goes only once they are written.
      if (full && (full = !dest.write(""))) return true;
      full = !dest.write(line);
      return true;
    },
  };
}
