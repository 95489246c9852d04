import { pino, type Logger } from "pino";
import { stdoutDestination, type Destination } from "./log-destination.js";

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

/** Each logger's destination, for {@link closeLog}. */
const DESTINATIONS = new WeakMap<Logger, Destination>();

/**
 * Structured JSON logs (one object per line, to stdout) with pino. Level from `LOG_LEVEL` (see
 * {@link logLevel}; not a level: info).
 * Nothing is logged per decision at `info`: the hot path stays quiet; metrics count decisions.
 * Stdout that takes no more for a while never stops the service (log-destination.ts): lines are
 * held up to a bound, then dropped, and a line says how many once stdout takes lines again.
 * @default level "info"
 * @example const log = createLogger(); log.info({ port: 8080 }, "listening");
 */
export function createLogger(level = process.env.LOG_LEVEL): Logger {
  // Called only once lines were dropped, long after `logger` is made.
  const destination = stdoutDestination((dropped) =>
    logger.warn({ dropped }, "log lines dropped: stdout took no more for a while (held lines were written first)"),
  );
  const logger = pino(
    { level: logLevel(level) ?? "info", base: { service: "ratekeeper" }, timestamp: pino.stdTimeFunctions.isoTime },
    destination,
  );
  DESTINATIONS.set(logger, destination);
  return logger;
}

/**
 * Before the process exits: waits for the lines `logger` (made by {@link createLogger}) still
 * holds to be written, at most `waitMs`, then resolves whether or not they were: a stdout that
 * takes nothing never holds the exit longer. Any other logger: resolves at once.
 * @default waitMs 2000
 * @example await closeLog(logger); process.exit(0);
 */
export function closeLog(logger: Logger, waitMs = 2000): Promise<void> {
  return DESTINATIONS.get(logger)?.drain(waitMs) ?? Promise.resolve();
}
