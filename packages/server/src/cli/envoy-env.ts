/**
 * envoyproxy/ratelimit's environment, read by `ratekeeper serve` so that swapping its image for
 * ratekeeper's is the migration: each variable it maps becomes the flag it stands for (a flag on
 * the command line wins), and every variable of that project that is set gets one log line at
 * start: what it was mapped to, or that it is not used and what to use instead (the table is
 * cli/envoy-env-vars.ts). Nothing is silently ignored, and an unused variable never stops the
 * service; a mapped one with a bad value is refused naming the variable, as a bad flag is.
 */
import { join } from "node:path";
import { logLevel } from "../log.js";
import { UsageError, port, ratio, type Values } from "./command.js";
import type { RlsHeaders } from "../transport/rls.js";
import { REDIS_CONNECTION_VARS, verdictFor } from "./envoy-env-vars.js";

/** One line to log at start. */
export interface EnvLine {
  readonly level: "info" | "warn";
  readonly variable: string;
  /** The value, unless the name suggests a secret or a file of one. */
  readonly value: string | undefined;
  readonly msg: string;
}

/** What the environment says. */
export interface EnvoyEnv {
  /** Flag values taken from the environment; merge under the command line's. */
  readonly flags: Values;
  /** LOG_LEVEL as a pino level (undefined: not set or not a level, then "info"). */
  readonly logLevel: string | undefined;
  readonly lines: readonly EnvLine[];
}

const SECRET = /AUTH|PASSWORD|TOKEN|KEY$|CERT|HEADERS|URL/;
/** envoyproxy/ratelimit's default RUNTIME_ROOT. */
const DEFAULT_RUNTIME_ROOT = "/srv/runtime_data/current";

/**
 * Reads envoyproxy/ratelimit's variables.
 * @throws UsageError naming the variable when a mapped one has a value that cannot be used
 * @example envoyEnvironment({ PORT: "9000", USE_STATSD: "true" }, {}).flags // { port: "9000" }
 */
export function envoyEnvironment(env: NodeJS.ProcessEnv, given: Values): EnvoyEnv {
  const flags: Values = {};
  const lines: EnvLine[] = [];
  const set = (name: string): string | undefined => env[name];
  /** Sets a flag from a variable, unless the command line gives it. */
  const toFlag = (name: string, flag: string, value: string, shown = value): void => {
    if (given[flag] !== undefined) note(name, "info", `--${flag} on the command line wins over ${name}`);
    else {
      flags[flag] = value;
      note(name, "info", `mapped to --${flag} ${shown}`);
    }
  };
  const note = (name: string, level: EnvLine["level"], text: string): void => {
    const value = set(name);
    lines.push({
      level,
      variable: name,
      value: SECRET.test(name) ? undefined : value,
      msg: `envoyproxy/ratelimit variable ${name}: ${text}`,
    });
  };

  const handled = new Set<string>();
  const take = (name: string): string | undefined => {
    handled.add(name);
    return set(name);
  };

  const host = take("HOST");
  if (host !== undefined && host !== "") toFlag("HOST", "host", host);
  const grpcHost = take("GRPC_HOST");
  if (grpcHost !== undefined && grpcHost !== "") toFlag("GRPC_HOST", "grpc-host", grpcHost);
  for (const [name, flag] of [
    ["PORT", "port"],
    ["GRPC_PORT", "grpc-port"],
  ] as const) {
    const v = take(name);
    if (v !== undefined && v !== "") toFlag(name, flag, String(port(v, name, 0)));
  }
  const nearRatio = take("NEAR_LIMIT_RATIO");
  if (nearRatio !== undefined && nearRatio !== "")
    toFlag("NEAR_LIMIT_RATIO", "near-limit-ratio", String(ratio(nearRatio, "NEAR_LIMIT_RATIO")));
  for (const [name, flag] of [
    ["GRPC_MAX_CONNECTION_AGE", "grpc-max-connection-age"],
    ["GRPC_MAX_CONNECTION_AGE_GRACE", "grpc-max-connection-age-grace"],
  ] as const) {
    const v = take(name);
    if (v !== undefined && v !== "") toFlag(name, flag, String(goDurationMs(v, name)));
  }
  const timeout = take("REDIS_TIMEOUT");
  if (timeout !== undefined && timeout !== "") toFlag("REDIS_TIMEOUT", "redis-timeout", String(goDurationMs(timeout, "REDIS_TIMEOUT")));

  const level = take("LOG_LEVEL");
  const pinoLevel = level === undefined ? undefined : logLevel(level);
  // LOG_LEVEL is ratekeeper's own too: a line only when it is read differently (WARN, warning) or not at all.
  if (level !== undefined && level !== pinoLevel)
    note(
      "LOG_LEVEL",
      pinoLevel ? "info" : "warn",
      pinoLevel ? `log level ${pinoLevel}` : "not a log level (debug, info, warn, error): info",
    );

  const shadow = take("SHADOW_MODE");
  if (shadow !== undefined) {
    if (!/^(1|t|true)$/i.test(shadow.trim())) note("SHADOW_MODE", "info", "false: limits are enforced");
    else if (given["global-shadow-mode"] !== undefined) note("SHADOW_MODE", "info", "--global-shadow-mode on the command line wins");
    else {
      flags["global-shadow-mode"] = true;
      note("SHADOW_MODE", "info", "mapped to --global-shadow-mode: Envoy RLS answers are OK overall even over a limit");
    }
  }
  configFromRuntime(env, given, toFlag, note, take);
  headersFromEnv(toFlag, note, take);

  for (const [name, value] of Object.entries(env)) {
    if (handled.has(name) || value === undefined) continue;
    // The Redis settings (cli/redis-flags.ts) read these only with a Redis URL.
    if (name !== "REDIS_URL" && REDIS_CONNECTION_VARS.some((n) => n === name) && !env.REDIS_URL && given.redis === undefined) {
      note(name, "warn", "not used without REDIS_URL (or --redis): the in-memory store");
      continue;
    }
    const verdict = verdictFor(name, value);
    if (verdict) note(name, verdict.kind === "mapped" ? "info" : "warn", verdict.text);
  }
  return { flags, logLevel: pinoLevel, lines };
}

type ToFlag = (name: string, flag: string, value: string, shown?: string) => void;
type Note = (name: string, level: EnvLine["level"], text: string) => void;

/** RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY as the rules directory, as its file provider reads it. */
function configFromRuntime(
  env: NodeJS.ProcessEnv,
  given: Values,
  toFlag: ToFlag,
  note: Note,
  take: (n: string) => string | undefined,
): void {
  const root = take("RUNTIME_ROOT");
  const sub = take("RUNTIME_SUBDIRECTORY");
  const app = take("RUNTIME_APPDIRECTORY");
  if (root === undefined && sub === undefined && app === undefined) return;
  const dir = join(root || DEFAULT_RUNTIME_ROOT, sub ?? "", app || "config");
  for (const name of ["RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"])
    if (env[name] !== undefined) note(name, "info", `part of the rules directory ${dir}`);
  if (given.config !== undefined)
    note(
      root !== undefined ? "RUNTIME_ROOT" : "RUNTIME_SUBDIRECTORY",
      "info",
      "--config on the command line wins over the RUNTIME_* directory",
    );
  else toFlag(root !== undefined ? "RUNTIME_ROOT" : sub !== undefined ? "RUNTIME_SUBDIRECTORY" : "RUNTIME_APPDIRECTORY", "config", dir);
}

/** LIMIT_RESPONSE_HEADERS_ENABLED and its header names, as `--rls-headers` and `--rls-header-names`. */
function headersFromEnv(toFlag: ToFlag, note: Note, take: (n: string) => string | undefined): void {
  const enabled = take("LIMIT_RESPONSE_HEADERS_ENABLED");
  if (enabled !== undefined)
    toFlag("LIMIT_RESPONSE_HEADERS_ENABLED", "rls-headers", /^(1|t|true)$/i.test(enabled.trim()) ? "envoy" : "none");
  const vars = ["LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"] as const;
  const names = vars.map((n) => take(n));
  const first = vars.findIndex((_, i) => names[i] !== undefined);
  if (first === -1) return;
  const value = [names[0] || "RateLimit-Limit", names[1] || "RateLimit-Remaining", names[2] || "RateLimit-Reset"].join(",");
  toFlag(vars[first] as string, "rls-header-names", value);
  for (let i = first + 1; i < vars.length; i++)
    if (names[i] !== undefined) note(vars[i] as string, "info", `part of --rls-header-names ${value}`);
}

/**
 * A Go duration (`10s`, `500ms`, `1m30s`, `1.5h`) in whole milliseconds.
 * @throws UsageError naming the variable
 */
export function goDurationMs(text: string, name: string): number {
  const UNIT: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let ms = 0;
  let at = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    ms += Number(m[1]) * (UNIT[m[2] as string] as number);
    at = re.lastIndex;
  }
  if (text === "0") return 0;
  if (at === 0 || at !== text.length)
    throw new UsageError(`${name}: must be a duration such as 10s, 500ms or 1m30s (got ${JSON.stringify(text)})`);
  return Math.round(ms);
}

/**
 * `--rls-headers` (`ratekeeper`, `envoy` or `none`) and `--rls-header-names LIMIT,REMAINING,RESET`
 * as the RLS answers' header option.
 * @throws UsageError naming the flag
 */
export function rlsHeadersOption(style: string | undefined, names: string | undefined): RlsHeaders | undefined {
  if (names !== undefined && style !== "envoy") throw new UsageError("--rls-header-names: only with --rls-headers envoy");
  if (style === undefined) return undefined;
  if (style === "ratekeeper" || style === "none") return { kind: style };
  if (style !== "envoy") throw new UsageError(`--rls-headers: must be ratekeeper, envoy or none (got ${JSON.stringify(style)})`);
  const [limit, remaining, reset, ...rest] = (names ?? "RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset")
    .split(",")
    .map((s) => s.trim());
  if (!limit || !remaining || !reset || rest.length > 0 || ![limit, remaining, reset].every((h) => /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(h)))
    throw new UsageError(`--rls-header-names: must be three header names, comma-separated (got ${JSON.stringify(names)})`);
  return { kind: "envoy", limit, remaining, reset };
}
