/**
 * Checks {@link ServeOptions} given by a program (the CLI's flags are checked on their own, and
 * then pass through here too): every bad value refused before anything listens, each named with
 * what it takes. Taken as given, `maxBodyBytes: NaN` would read bodies of any size, a timer past
 * 2^31 - 1 ms would fire after 1 ms (node's overflow), and a misspelt option would pass silently.
 */
import { z } from "zod";
import { MAX_TIMER_MS, RateLimitConfigError } from "ratekeeper";
import { HEADER_STYLES } from "ratekeeper/http";
import { REDIS_FAILURES } from "./redis-store.js";
import type { ServeOptions } from "./server.js";

/** A whole number from `min` to `max`, its message saying so. */
const whole = (min: number, max: number, what: string) => {
  const error = `must be a whole number ${what} from ${min} to ${max}`;
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error }).optional();
};
const ms = (min: number) => whole(min, MAX_TIMER_MS, "of ms");
const bytes = (min: number) => whole(min, Number.MAX_SAFE_INTEGER, "of bytes");
const port = z
  .number({ error: "must be a port number 0-65535" })
  .int({ error: "must be a port number 0-65535" })
  .min(0, { error: "must be a port number 0-65535" })
  .max(65535, { error: "must be a port number 0-65535" })
  .optional();
const flag = z.boolean({ error: "must be true or false" }).optional();
const text = z.string({ error: "must be a non-empty string" }).min(1, { error: "must be a non-empty string" }).optional();
const fn = z.custom<(...args: never[]) => unknown>((v) => typeof v === "function");

const Options = z.strictObject({
  configFile: z.string({ error: "must be the rules file's path" }).min(1, { error: "must be the rules file's path" }),
  mergeDomains: flag,
  redisUrl: text,
  redis: z.object({}, { error: "must be a Redis connection object (parseRedisSettings)" }).loose().optional(),
  redisFailure: z.enum(REDIS_FAILURES as [string, ...string[]], { error: `must be one of ${REDIS_FAILURES.join(", ")}` }).optional(),
  redisTimeoutMs: ms(0),
  port,
  grpcPort: port,
  host: text,
  grpcHost: text,
  grpcMaxConnectionAgeMs: ms(1),
  grpcMaxConnectionAgeGraceMs: ms(0),
  watch: flag,
  memoryMaxBytes: bytes(4096),
  reloadSettleMs: ms(0),
  maxRulesBytes: bytes(1),
  allowEmptyRules: flag,
  adminToken: z.string({ error: "must be a string (the admin API's bearer token)" }).optional(),
  overrides: z
    .object({ lookup: z.object({}).loose(), close: fn }, { error: "must be { lookup, store, close } (the overrides cache and store)" })
    .loose()
    .optional(),
  rlsHeaders: z
    .discriminatedUnion(
      "kind",
      [
        z.object({ kind: z.literal("ratekeeper") }),
        z.object({ kind: z.literal("none") }),
        z.object({ kind: z.literal("envoy"), limit: z.string(), remaining: z.string(), reset: z.string() }),
      ],
      { error: 'must be { kind: "ratekeeper" }, { kind: "none" } or { kind: "envoy", limit, remaining, reset } (header names)' },
    )
    .optional(),
  globalShadowMode: flag,
  nearLimitRatio: z
    .number({ error: "must be a number from 0 to 1" })
    .min(0, { error: "must be a number from 0 to 1" })
    .max(1, { error: "must be a number from 0 to 1" })
    .optional(),
  maxDetailedMetricKeys: whole(0, Number.MAX_SAFE_INTEGER, "of keys"),
  headerStyles: z
    .array(z.enum(HEADER_STYLES as [string, ...string[]], { error: `each must be one of ${HEADER_STYLES.join(", ")}` }))
    .optional(),
  requestTimeoutMs: ms(1),
  maxBodyBytes: bytes(1),
  dashboard: flag,
  shutdownTimeoutMs: ms(0),
  logger: z
    .object({ info: fn, warn: fn, error: fn, debug: fn }, { error: "must be a pino logger (info, warn, error, debug)" })
    .loose()
    .optional(),
});

/**
 * @throws RateLimitConfigError listing every bad option, e.g. `startService: reloadSettleMs: must
 * be a whole number of ms from 0 to 2147483647 (got -5)`
 */
export function checkServeOptions(options: ServeOptions): void {
  const parsed = Options.safeParse(options, { reportInput: true });
  if (parsed.success) return;
  const issues = parsed.error.issues.map((i) => {
    const path = i.path.map(String).join(".") || "options";
    if (i.code === "unrecognized_keys") {
      return { path: i.keys.join(", "), message: "unknown option (see ServeOptions for the names)" };
    }
    return { path, message: `${i.message}${"input" in i ? ` (got ${shown(i.input)})` : ""}` };
  });
  throw new RateLimitConfigError(issues, "startService");
}

function shown(v: unknown): string {
  if (typeof v === "number") return String(v);
  if (typeof v === "function") return "a function";
  try {
    return JSON.stringify(v)?.slice(0, 80) ?? String(v);
  } catch {
    return typeof v;
  }
}
