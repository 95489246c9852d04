import { pino, type Logger } from "pino";

export type { Logger };

/**
 * Structured JSON logs (one object per line, to stdout) with pino. Level from `LOG_LEVEL`.
 * Nothing is logged per decision at `info`: the hot path stays quiet; metrics count decisions.
 * @default level "info"
 * @example const log = createLogger(); log.info({ port: 8080 }, "listening");
 */
export function createLogger(level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({ level, base: { service: "ratekeeper" }, timestamp: pino.stdTimeFunctions.isoTime });
}
