import { fileURLToPath } from "node:url";
import { MAX_TIMER_MS } from "ratekeeper";
import { HEADER_STYLES, type HeaderStyle } from "ratekeeper/http";
import { closeLog, createLogger, logStopping, type Logger } from "../log.js";
import { exitOnUncaught } from "./fatal.js";
import { OverrideCache } from "../overrides/cache.js";
import { checkOverridesUrl, openOverrideStore } from "../overrides/open.js";
import { startService, type RunningService, type ServeOptions, type ServiceOverrides } from "../server.js";
import { chooseAdminToken } from "./admin-token.js";
import { REDIS_FAILURES, type RedisFailureName } from "../redis-store.js";
import { UsageError, nonNegative, port, positive, ratio, str, type Command, type Values } from "./command.js";
import { REDIS_FLAGS, REDIS_FLAG_HELP, redisFromCommandLine } from "./redis-flags.js";
import { envoyEnvironment, rlsHeadersOption } from "./envoy-env.js";

/**
 * The rules `ratekeeper serve` runs without --config, so that `npx @ratekeeper/server serve` works
 * on its own (shipped in the package: ../../rules/ from dist/cli/).
 */
export const DEFAULT_RULES_FILE = fileURLToPath(new URL("../../rules/default.yaml", import.meta.url));

/** `ratekeeper serve`: the decision service, until SIGTERM or SIGINT. */
export const SERVE_COMMAND: Command = {
  words: ["serve"],
  args: "",
  summary: "run the decision service (HTTP API, Envoy rate limit gRPC API, /metrics)",
  flags: {
    config: { type: "string", short: "c" },
    ...REDIS_FLAGS,
    "redis-failure": { type: "string" },
    "redis-timeout": { type: "string" },
    port: { type: "string", short: "p" },
    "grpc-port": { type: "string" },
    host: { type: "string" },
    overrides: { type: "string" },
    "admin-token": { type: "string" },
    "admin-token-file": { type: "string" },
    headers: { type: "string" },
    "request-timeout": { type: "string" },
    "max-body": { type: "string" },
    "no-watch": { type: "boolean" },
    "reload-settle": { type: "string" },
    "max-rules-bytes": { type: "string" },
    "allow-empty-rules": { type: "boolean" },
    "memory-max-bytes": { type: "string" },
    "no-dashboard": { type: "boolean" },
    "near-limit-ratio": { type: "string" },
    "max-detailed-metric-keys": { type: "string" },
    "grpc-host": { type: "string" },
    "rls-headers": { type: "string" },
    "rls-header-names": { type: "string" },
    "global-shadow-mode": { type: "boolean" },
    "grpc-max-connection-age": { type: "string" },
    "grpc-max-connection-age-grace": { type: "string" },
  },
  flagHelp: {
    config:
      "PATH  rules file (YAML), ours or envoyproxy/ratelimit's, or a directory of them (reloaded as files are added, changed or removed; MERGE_DOMAIN_CONFIG=true merges a domain split over its files) [default: the built-in rules, rules/default.yaml in this package]",
    ...REDIS_FLAG_HELP,
    "redis-failure":
      "POLICY  what answers while Redis is down: degraded (each instance limits at its share and charges Redis when it is back), open (admit), closed (deny), insurance (per-process memory store), throw (503) [default degraded]",
    "redis-timeout":
      "MS  how long Redis may stay silent with calls waiting before the failure policy answers; 0: no timeout [default 1000]",
    port: "N  HTTP port [env PORT, default 8080]",
    "grpc-port": "N  gRPC port (Envoy RLS) [env GRPC_PORT, default 8081]",
    host: "ADDR  interface to listen on [env HOST, default 0.0.0.0]",
    overrides: "URL  per-key overrides store: sqlite:./overrides.db or postgres://... [env RATEKEEPER_OVERRIDES]",
    "admin-token":
      "TOKEN  turn on the admin API (/v1/admin/*) with this bearer token, at least 16 characters (visible in ps: prefer the file or the environment) [env RATEKEEPER_ADMIN_TOKEN]",
    "admin-token-file": "FILE  the admin token from a file only its owner can read (chmod 600), e.g. a mounted secret",
    headers: "STYLES  limit header styles, comma-separated: ietf, draft-7, draft-6, x-ratelimit [default ietf, as the middleware]",
    "request-timeout": "MS  time a client has to send a whole request; slower ones get 408 [default 10000]",
    "max-body": "BYTES  largest request body; larger ones get 413 [default 65536]",
    "no-watch": "do not reload the rules file when it changes",
    "reload-settle": "MS  a changed rules file is read once it has been quiet this long (no half-written file applies) [default 2000]",
    "max-rules-bytes": "BYTES  largest rules file read, at start and on reload; larger ones are refused [default 4194304]",
    "allow-empty-rules":
      "start on, or apply a reloaded, rules file or directory that has no rules (refused otherwise: it would lift every limit)",
    "memory-max-bytes": "BYTES  bound on the in-memory store's estimated key memory; older keys are dropped [default 268435456]",
    "no-dashboard": "do not serve /dashboard (nor count what it shows)",
    "near-limit-ratio":
      "RATIO  hits above this share of a limit count as near_limit in envoyproxy/ratelimit's stats (0-1) [env NEAR_LIMIT_RATIO, default 0.8]",
    "max-detailed-metric-keys":
      "N  stat keys carrying request values (detailed_metric, descriptors' own limits) kept in /metrics; further ones count as (overflow) [default 1000]",
    "grpc-host": "ADDR  interface the gRPC port listens on [env GRPC_HOST, default: --host]",
    "rls-headers":
      "STYLE  headers of Envoy RLS answers: ratekeeper (RateLimit-*, Retry-After), envoy (envoyproxy/ratelimit's limit, remaining, reset) or none [env LIMIT_RESPONSE_HEADERS_ENABLED: true envoy, false none; default ratekeeper]",
    "grpc-max-connection-age":
      "MS  close (GOAWAY) a gRPC connection this old, so clients spread over instances again [env GRPC_MAX_CONNECTION_AGE, default never]",
    "grpc-max-connection-age-grace": "MS  time calls in flight then have [env GRPC_MAX_CONNECTION_AGE_GRACE, default unlimited]",
    "global-shadow-mode":
      "Envoy RLS answers are OK overall even over a limit (each descriptor's status still says OVER_LIMIT): try limits without denying [env SHADOW_MODE=true]",
    "rls-header-names":
      "L,R,S  the envoy style's header names [env LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER; default RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset]",
  },
  async run(commandLine) {
    // envoyproxy/ratelimit's variables, as flags under the command line's (cli/envoy-env.ts).
    const envoy = envoyEnvironment(process.env, commandLine);
    const v = { ...envoy.flags, ...commandLine };
    // Every flag is checked before anything is written: a usage error comes alone.
    const flags = checkFlags(v);
    const options = serveOptions(v, flags);
    const rlsHeaders = rlsHeadersOption(str(v["rls-headers"]), str(v["rls-header-names"]));
    const admin = chooseAdminToken(v, process.env);
    const overridesUrl = str(v.overrides) ?? process.env.RATEKEEPER_OVERRIDES;
    if (overridesUrl) checkOverridesUrl(overridesUrl);
    const logger = createLogger(envoy.logLevel);
    exitOnUncaught(logger, LOG_DRAIN_MS);
    // Listened for from now, not once the service is up: its "listening" line is written
    // synchronously, and a SIGTERM sent on reading it would otherwise meet the default action.
    const signalled = stopSignal();
    const hangup = onHangup(logger);
    if (flags.given === undefined)
      logger.warn(
        { config: flags.configFile },
        "no --config: serving the built-in default rules (100 a minute per remote_address in domain web, policy default); copy the file and pass --config FILE for your own",
      );
    if (admin.warning) logger.warn(admin.warning);
    for (const l of envoy.lines) logger[l.level]({ variable: l.variable, value: l.value }, l.msg);
    let running;
    try {
      running = await start({ ...options, rlsHeaders, adminToken: admin.token, logger }, overridesUrl);
    } catch (e) {
      // Said on stderr too (cli/main.ts), and the exit waits for the log (cli.ts): one who reads
      // only the JSON log sees why the service never started.
      logStopping(logger, () => logger.error({ err: e }, "start failed"));
      throw e;
    }
    hangup.running = running;
    return untilSignal(running, logger, signalled);
  },
};

/** The overrides (when `overridesUrl` names them), then the service; the overrides closed if the service fails to start. */
async function start(options: ServeOptions & { logger: Logger }, overridesUrl: string | undefined): Promise<RunningService> {
  const overrides = overridesUrl ? await openOverrides(overridesUrl, options.logger) : undefined;
  try {
    return await startService({ ...options, overrides });
  } catch (e) {
    await overrides?.close();
    throw e;
  }
}

/** The flags checked before anything starts (a usage error stops the command before it logs). */
interface CheckedFlags {
  /** `--config` as given; undefined: the built-in rules. */
  readonly given: string | undefined;
  readonly configFile: string;
  readonly redisFailure: RedisFailureName | undefined;
  readonly headerStyles: HeaderStyle[];
  readonly memoryMaxBytes: number | undefined;
}

function checkFlags(v: Values): CheckedFlags {
  const given = str(v.config);
  if (given === "") throw new UsageError("--config: needs a file name (the rules file, e.g. rules.yaml)");
  const configFile = given ?? DEFAULT_RULES_FILE;
  const redisFailure = str(v["redis-failure"]);
  if (redisFailure !== undefined && !REDIS_FAILURES.includes(redisFailure as RedisFailureName)) {
    throw new UsageError(`--redis-failure: must be ${REDIS_FAILURES.join(", ")} (got ${JSON.stringify(redisFailure)})`);
  }
  const headerStyles = (str(v.headers) ?? "ietf").split(",").map((x) => x.trim()) as HeaderStyle[];
  for (const h of headerStyles)
    if (!HEADER_STYLES.includes(h))
      throw new UsageError(`--headers: each style must be one of ${HEADER_STYLES.join(", ")} (got ${JSON.stringify(h)})`);
  const memoryMaxBytes = positive(str(v["memory-max-bytes"]), "--memory-max-bytes");
  if (memoryMaxBytes !== undefined && memoryMaxBytes < 4096)
    throw new UsageError(`--memory-max-bytes: must be at least 4096 (got ${memoryMaxBytes})`);
  return { given, configFile, redisFailure: redisFailure as RedisFailureName | undefined, headerStyles, memoryMaxBytes };
}

/** The service's options from the flags (and the environment variables that stand for some). */
function serveOptions(v: Values, flags: CheckedFlags): ServeOptions {
  return {
    configFile: flags.configFile,
    redis: redisFromCommandLine(v, process.env),
    mergeDomains: process.env.MERGE_DOMAIN_CONFIG === "true",
    redisFailure: flags.redisFailure,
    port: port(str(v.port) ?? process.env.PORT, "--port", 8080),
    redisTimeoutMs: nonNegative(str(v["redis-timeout"]), "--redis-timeout", MAX_TIMER_MS),
    grpcPort: port(str(v["grpc-port"]) ?? process.env.GRPC_PORT, "--grpc-port", 8081),
    host: str(v.host),
    grpcHost: str(v["grpc-host"]),
    globalShadowMode: v["global-shadow-mode"] === true,
    grpcMaxConnectionAgeMs: positive(str(v["grpc-max-connection-age"]), "--grpc-max-connection-age", MAX_TIMER_MS),
    grpcMaxConnectionAgeGraceMs: nonNegative(str(v["grpc-max-connection-age-grace"]), "--grpc-max-connection-age-grace", MAX_TIMER_MS),
    watch: flags.given !== undefined && v["no-watch"] !== true,
    reloadSettleMs: positive(str(v["reload-settle"]), "--reload-settle", MAX_TIMER_MS),
    maxRulesBytes: positive(str(v["max-rules-bytes"]), "--max-rules-bytes"),
    allowEmptyRules: v["allow-empty-rules"] === true,
    memoryMaxBytes: flags.memoryMaxBytes,
    dashboard: v["no-dashboard"] !== true,
    headerStyles: flags.headerStyles,
    requestTimeoutMs: positive(str(v["request-timeout"]), "--request-timeout", MAX_TIMER_MS),
    maxBodyBytes: positive(str(v["max-body"]), "--max-body"),
    nearLimitRatio: ratio(str(v["near-limit-ratio"]), "--near-limit-ratio"),
    maxDetailedMetricKeys: positive(str(v["max-detailed-metric-keys"]), "--max-detailed-metric-keys"),
  };
}

/**
 * The first SIGTERM or SIGINT from now (listening for them replaces their default action). Both
 * listeners go with the first: a second stop signal during the graceful stop (Ctrl-C again, a
 * `kill` after Ctrl-C) meets the default action and ends the process at once, as users expect.
 */
function stopSignal(): Promise<string> {
  return new Promise<string>((resolve) => {
    const stop = (signal: string): void => {
      process.removeListener("SIGTERM", onTerm);
      process.removeListener("SIGINT", onInt);
      resolve(signal);
    };
    const onTerm = (): void => stop("SIGTERM");
    const onInt = (): void => stop("SIGINT");
    process.once("SIGTERM", onTerm);
    process.once("SIGINT", onInt);
  });
}

/**
 * SIGHUP (`kill -HUP`, systemd's usual ExecReload, a closed terminal) never stops the service (its
 * default action would, with no graceful stop): it looks at the rules now, as a change would, and
 * says so. Listened for from the start, like SIGTERM; before the service is up it only says so.
 */
function onHangup(logger: Logger): { running: RunningService | undefined } {
  const state: { running: RunningService | undefined } = { running: undefined };
  process.on("SIGHUP", () => {
    const svc = state.running;
    if (svc === undefined) logger.info({ signal: "SIGHUP" }, "SIGHUP while starting: nothing to do (the service is reading its rules now)");
    else if (svc.checkRules())
      logger.info({ signal: "SIGHUP" }, "SIGHUP: checking the rules now (a changed file applies as on any change)");
    else logger.info({ signal: "SIGHUP" }, "SIGHUP: the rules stay (--no-watch); restart the service to load others");
  });
  return state;
}

/**
 * Runs until `signalled` (which may have come while the service started), then stops gracefully;
 * resolves the exit code once the log lines still held are written, or LOG_DRAIN_MS has passed.
 */
async function untilSignal(svc: RunningService, logger: Logger, signalled: Promise<string>): Promise<number> {
  const signal = await signalled;
  logStopping(logger, () => logger.info({ signal }, "shutting down"));
  let code = 0;
  try {
    await svc.close();
  } catch (e) {
    logStopping(logger, () => logger.error({ err: e }, "shutdown failed"));
    code = 1;
  }
  await closeLog(logger, LOG_DRAIN_MS);
  return code;
}

/** How long the exit waits for held log lines (a stalled stdout, a full disk) to be taken. */
const LOG_DRAIN_MS = 2000;

/**
 * Opens the overrides store named by `--overrides` and its in-memory cache (the hot path's
 * lookup). The overrides module owns both; this only wires them to the service.
 */
async function openOverrides(url: string, logger: ReturnType<typeof createLogger>): Promise<ServiceOverrides> {
  const store = await openOverrideStore(url, {
    onListenerEvent: (e) =>
      e.type === "connected"
        ? logger.info({ backendPid: e.backendPid, reconnects: e.reconnects }, "overrides: LISTEN connection up")
        : logger.warn({ err: e.error?.message, event: e.type }, "overrides: LISTEN connection lost; reconnecting and resyncing"),
  });
  const cache = await OverrideCache.start(store, { onError: (err, during) => logger.warn({ err, during }, "overrides cache") });
  logger.info({ overrides: store.description }, "overrides loaded");
  return {
    lookup: cache,
    store,
    async close() {
      cache.close();
      await store.close();
    },
  };
}
