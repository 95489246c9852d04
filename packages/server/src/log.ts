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
  // Written synchronously. pino's default destination writes asynchronously and, at exit, flushes
  // the rest synchronously; on a stdout pipe whose reader is gone that flush retries EPIPE every
  // 100 ms for good, so a SIGTERM stopped the service but never ended the process. A synchronous
  // write meets EPIPE at once and pino then drops further lines. The service logs a few lines,
  // never one per decision, so writing them synchronously costs nothing on the hot path.
  const dest = pino.destination({ dest: 1, sync: true });
  // pino stops writing on EPIPE only, and re-emits any other error of its destination: with no
  // listener, an uncaught exception. A closed terminal (EIO: the line saying SIGHUP was heard,
  // on the tty that sent it), a closed or failing stdout took the service down for a log line.
  // A service that cannot log keeps deciding: the lines are dropped from then on, as on EPIPE.
  dest.on("error", () => {
    const drop = (): boolean => true;
    Object.assign(dest, { write: drop, flushSync: () => undefined, end: () => undefined });
  });
  return pino({ level: logLevel(level) ?? "info", base: { service: "ratekeeper" }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}
