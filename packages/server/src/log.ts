import { pino, type DestinationStream, type Logger } from "pino";
import { stdoutDestination, type Destination } from "./log-destination.js";
import { RepeatedLines } from "./log-repeats.js";

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

/** Each logger's destination and repeat counter, for {@link closeLog}. */
const DESTINATIONS = new WeakMap<Logger, { destination: Destination | undefined; repeats: RepeatedLines }>();

/** The loggers writing to stdout that {@link closeLog} has not closed yet, for {@link closeLogs}. */
const OPEN = new Set<Logger>();

/**
 * Structured JSON logs (one object per line, to stdout) with pino. Level from `LOG_LEVEL` (see
 * {@link logLevel}; not a level: info).
 * Nothing is logged per decision at `info`: the hot path stays quiet; metrics count decisions.
 * Stdout that takes no more for a while never stops the service (log-destination.ts): lines are
 * held up to a bound, then dropped, and a line says how many once stdout takes lines again.
 * A line naming an `errorId` already written with the same message is counted instead, and
 * written as one count per interval (log-repeats.ts): an outage is a few lines, not one a request.
 * @param stream where the lines go instead of stdout (a test reading them)
 * @default level "info"
 * @example const log = createLogger(); log.info({ port: 8080 }, "listening");
 */
export function createLogger(level = process.env.LOG_LEVEL, stream?: DestinationStream): Logger {
  // Called only once lines were dropped, long after `logger` is made.
  const destination = stream
    ? undefined
    : stdoutDestination((dropped) =>
        logger.warn({ dropped }, "log lines dropped: stdout took no more for a while (held lines were written first)"),
      );
  const repeats = new RepeatedLines();
  const logger = pino(
    {
      level: logLevel(level) ?? "info",
      base: { service: "ratekeeper" },
      timestamp: pino.stdTimeFunctions.isoTime,
      hooks: {
        logMethod(args, method, n) {
          if (!repeats.repeated(args, this.levels.labels[n] ?? "error")) method.apply(this, args);
        },
      },
    },
    stream ?? (destination as Destination),
  );
  repeats.attach(logger);
  DESTINATIONS.set(logger, { destination, repeats });
  if (destination) OPEN.add(logger);
  return logger;
}

/**
 * Calls `log`, whose lines say why the process stops ("shutting down", "stopped", a start that
 * failed): with `logger` made by {@link createLogger}, a stdout full at that moment still holds
 * them, in room kept for them past its bound (log-destination.ts RESERVED_BYTES), after a count of
 * the lines dropped before them, for {@link closeLog} to write. Any other logger: just calls `log`.
 * @example logStopping(logger, () => logger.info("stopped"));
 */
export function logStopping(logger: Logger, log: () => void): void {
  const destination = DESTINATIONS.get(logger)?.destination;
  if (destination) destination.reserved(log);
  else log();
}

/**
 * Before the process exits: writes the counts of repeated lines not yet written, and waits for the
 * lines `logger` (made by {@link createLogger}) still holds to be written, at most `waitMs`, then
 * resolves whether or not they were: a stdout that takes nothing never holds the exit longer.
 * Any other logger: resolves at once.
 * @default waitMs 2000
 * @example await closeLog(logger); process.exit(0);
 */
export function closeLog(logger: Logger, waitMs = 2000): Promise<void> {
  const parts = DESTINATIONS.get(logger);
  if (parts === undefined) return Promise.resolve();
  OPEN.delete(logger);
  parts.repeats.flush();
  return parts.destination?.drain(waitMs) ?? Promise.resolve();
}

/**
 * {@link closeLog} for every logger writing to stdout not closed yet: what the process does on
 * any way out (cli.ts), a start that failed included, so that the lines it holds (the one saying
 * why it stops among them) get the same bounded wait as at a stop by SIGTERM.
 * @default waitMs 2000
 * @example await closeLogs(); process.exit(code);
 */
export async function closeLogs(waitMs = 2000): Promise<void> {
  await Promise.all([...OPEN].map((logger) => closeLog(logger, waitMs)));
}

/**
 * {@link closeLog}, then lets go of what `logger` holds of stdout (a pipe's own descriptor, its
 * handle): for a logger that ends before the process, such as the one `startService` (server.ts) makes
 * for itself, which an application may start and stop many times. Lines logged to it afterwards
 * are dropped. Any other logger: resolves at once.
 * @default waitMs 2000
 * @example await endLog(logger);
 */
export async function endLog(logger: Logger, waitMs = 2000): Promise<void> {
  await closeLog(logger, waitMs);
  DESTINATIONS.get(logger)?.destination?.release();
}
