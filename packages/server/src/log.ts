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
  return pino({ level: logLevel(level) ?? "info", base: { service: "ratekeeper" }, timestamp: pino.stdTimeFunctions.isoTime });
}
