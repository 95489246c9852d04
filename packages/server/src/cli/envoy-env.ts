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
  const r = new EnvReader(env, given);
  listeners(r);
  const pinoLevel = logLevelFromEnv(r);
  shadowMode(r);
  configFromRuntime(r);
  headersFromEnv(r);
  theRest(r);
  return { flags: r.flags, logLevel: pinoLevel, lines: r.lines };
}

/** The environment being read: the flags it gives, the lines to log, and the variables handled so far. */
class EnvReader {
  readonly flags: Values = {};
  readonly lines: EnvLine[] = [];
  private readonly handled = new Set<string>();

  constructor(
    readonly env: NodeJS.ProcessEnv,
    /** The command line's flags: they win over the environment. */
    readonly given: Values,
  ) {}

  /** A variable's value, marking it handled (the rest get their verdict from envoy-env-vars.ts). */
  take(name: string): string | undefined {
    this.handled.add(name);
    return this.env[name];
  }

  isHandled(name: string): boolean {
    return this.handled.has(name);
  }

  /** Sets a flag from a variable, unless the command line gives it. */
  toFlag(name: string, flag: string, value: string, shown = value): void {
    if (this.given[flag] !== undefined) this.note(name, "info", `--${flag} on the command line wins over ${name}`);
    else {
      this.flags[flag] = value;
      this.note(name, "info", `mapped to --${flag} ${shown}`);
    }
  }

  /** One line about a variable (its value left out when the name suggests a secret). */
  note(name: string, level: EnvLine["level"], text: string): void {
    const value = this.env[name];
    this.lines.push({
      level,
      variable: name,
      value: SECRET.test(name) ? undefined : value,
      msg: `envoyproxy/ratelimit variable ${name}: ${text}`,
    });
  }
}

/** HOST, GRPC_HOST, PORT, GRPC_PORT, the gRPC connection age, NEAR_LIMIT_RATIO and REDIS_TIMEOUT: each one flag. */
function listeners(r: EnvReader): void {
  const nonEmpty = (name: string): string | undefined => {
    const v = r.take(name);
    return v === undefined || v === "" ? undefined : v;
  };
  for (const [name, flag] of [
    ["HOST", "host"],
    ["GRPC_HOST", "grpc-host"],
  ] as const) {
    const v = nonEmpty(name);
    if (v !== undefined) r.toFlag(name, flag, v);
  }
  for (const [name, flag] of [
    ["PORT", "port"],
    ["GRPC_PORT", "grpc-port"],
  ] as const) {
    const v = nonEmpty(name);
    if (v !== undefined) r.toFlag(name, flag, String(port(v, name, 0)));
  }
  const nearRatio = nonEmpty("NEAR_LIMIT_RATIO");
  if (nearRatio !== undefined) r.toFlag("NEAR_LIMIT_RATIO", "near-limit-ratio", String(ratio(nearRatio, "NEAR_LIMIT_RATIO")));
  for (const [name, flag] of [
    ["GRPC_MAX_CONNECTION_AGE", "grpc-max-connection-age"],
    ["GRPC_MAX_CONNECTION_AGE_GRACE", "grpc-max-connection-age-grace"],
    ["REDIS_TIMEOUT", "redis-timeout"],
  ] as const) {
    const v = nonEmpty(name);
    if (v !== undefined) r.toFlag(name, flag, String(goDurationMs(v, name)));
  }
}

/** LOG_LEVEL as a pino level; it is ratekeeper's own too: a line only when it is read differently (WARN, warning) or not at all. */
function logLevelFromEnv(r: EnvReader): string | undefined {
  const level = r.take("LOG_LEVEL");
  const pinoLevel = level === undefined ? undefined : logLevel(level);
  if (level !== undefined && level !== pinoLevel)
    r.note(
      "LOG_LEVEL",
      pinoLevel ? "info" : "warn",
      pinoLevel ? `log level ${pinoLevel}` : "not a log level (debug, info, warn, error): info",
    );
  return pinoLevel;
}

/** SHADOW_MODE=true as --global-shadow-mode. */
function shadowMode(r: EnvReader): void {
  const shadow = r.take("SHADOW_MODE");
  if (shadow === undefined) return;
  if (!/^(1|t|true)$/i.test(shadow.trim())) r.note("SHADOW_MODE", "info", "false: limits are enforced");
  else if (r.given["global-shadow-mode"] !== undefined) r.note("SHADOW_MODE", "info", "--global-shadow-mode on the command line wins");
  else {
    r.flags["global-shadow-mode"] = true;
    r.note("SHADOW_MODE", "info", "mapped to --global-shadow-mode: Envoy RLS answers are OK overall even over a limit");
  }
}

/** Every other variable of envoyproxy/ratelimit that is set: its verdict (envoy-env-vars.ts). */
function theRest(r: EnvReader): void {
  for (const [name, value] of Object.entries(r.env)) {
    if (r.isHandled(name) || value === undefined) continue;
    // The Redis settings (cli/redis-flags.ts) read these only with a Redis URL.
    if (name !== "REDIS_URL" && REDIS_CONNECTION_VARS.some((n) => n === name) && !r.env.REDIS_URL && r.given.redis === undefined) {
      r.note(name, "warn", "not used without REDIS_URL (or --redis): the in-memory store");
      continue;
    }
    const verdict = verdictFor(name, value);
    if (verdict) r.note(name, verdict.kind === "mapped" ? "info" : "warn", verdict.text);
  }
}

/** RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY as the rules directory, as its file provider reads it. */
function configFromRuntime(r: EnvReader): void {
  const root = r.take("RUNTIME_ROOT");
  const sub = r.take("RUNTIME_SUBDIRECTORY");
  const app = r.take("RUNTIME_APPDIRECTORY");
  if (root === undefined && sub === undefined && app === undefined) return;
  const dir = join(root || DEFAULT_RUNTIME_ROOT, sub ?? "", app || "config");
  for (const name of ["RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"])
    if (r.env[name] !== undefined) r.note(name, "info", `part of the rules directory ${dir}`);
  if (r.given.config !== undefined)
    r.note(
      root !== undefined ? "RUNTIME_ROOT" : "RUNTIME_SUBDIRECTORY",
      "info",
      "--config on the command line wins over the RUNTIME_* directory",
    );
  else r.toFlag(root !== undefined ? "RUNTIME_ROOT" : sub !== undefined ? "RUNTIME_SUBDIRECTORY" : "RUNTIME_APPDIRECTORY", "config", dir);
}

/** LIMIT_RESPONSE_HEADERS_ENABLED and its header names, as `--rls-headers` and `--rls-header-names`. */
function headersFromEnv(r: EnvReader): void {
  const enabled = r.take("LIMIT_RESPONSE_HEADERS_ENABLED");
  if (enabled !== undefined)
    r.toFlag("LIMIT_RESPONSE_HEADERS_ENABLED", "rls-headers", /^(1|t|true)$/i.test(enabled.trim()) ? "envoy" : "none");
  const vars = ["LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"] as const;
  const names = vars.map((n) => r.take(n));
  const first = vars.findIndex((_, i) => names[i] !== undefined);
  if (first === -1) return;
  const value = [names[0] || "RateLimit-Limit", names[1] || "RateLimit-Remaining", names[2] || "RateLimit-Reset"].join(",");
  r.toFlag(vars[first] as string, "rls-header-names", value);
  for (let i = first + 1; i < vars.length; i++)
    if (names[i] !== undefined) r.note(vars[i] as string, "info", `part of --rls-header-names ${value}`);
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
