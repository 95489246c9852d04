import type { Server as HttpServer } from "node:http";
import { statSync } from "node:fs";
import type { AddressInfo } from "node:net";
import type { Server as GrpcServer } from "@grpc/grpc-js";
import { MemoryStore, type Store } from "ratekeeper";
import type { HeaderStyle } from "ratekeeper/http";
import { loadRulesFile } from "./config/load.js";
import { watchRules, type RulesWatch } from "./config/reload.js";
import { watchRulesDir, type WatchRulesDirOptions } from "./config/reload-dir.js";
import { rulesState } from "./config/watch.js";
import { createDashboard, type Dashboard } from "./dashboard/routes.js";
import { DashboardStats, TeeObserver } from "./dashboard/stats.js";
import type { StoreHealth } from "./dashboard/state.js";
import { createLogger, endLog, logStopping, type Logger } from "./log.js";
import { Metrics } from "./metrics.js";
import { redisReady } from "./redis-client.js";
import { describeRedis, parseRedisSettings, type RedisConnection } from "./redis-connection.js";
import { openServiceRedis, type RedisFailureName, type ServiceRedis } from "./redis-store.js";
import { checkServeOptions } from "./serve-options.js";
import type { OverrideLookup, OverrideStore } from "./overrides/types.js";
import { DecisionService } from "./service/decide.js";
import { bindGrpc, createGrpcServer } from "./transport/grpc.js";
import type { RlsHeaders } from "./transport/rls.js";
import { createHttpServer } from "./transport/http.js";

/** Overrides handed to the service: the hot-path lookup, the store (for the admin API), and how to close them. */
export interface ServiceOverrides {
  readonly lookup: OverrideLookup;
  /** The configuration store; passed to the admin handler as `ctx.overrides`. */
  readonly store: unknown;
  close(): Promise<void> | void;
}

/** Options of {@link startService}. */
export interface ServeOptions {
  /** The rules file (YAML). */
  configFile: string;
  /** A directory of rules files: merge a domain found in several files (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`). @default false */
  mergeDomains?: boolean | undefined;
  /** `redis://host:port` (or `rediss://`): use the Redis store on a single Redis (shared by every instance); otherwise the memory store. */
  redisUrl?: string | undefined;
  /** A Redis Cluster, Sentinel, or a single Redis with TLS and credentials (redis-connection.ts); takes precedence over `redisUrl`. */
  redis?: RedisConnection | undefined;
  /**
   * What answers while Redis is down (the library's `failure` option): `degraded` keeps limiting
   * in each instance at its share of every limit and charges Redis when it is back; `open`
   * admits, `closed` denies, `insurance` decides with a per-process MemoryStore at the full
   * limit, `throw` fails the check (HTTP 503, gRPC UNAVAILABLE). Whatever the policy, /readyz
   * says not ready while Redis is down.
   * @default "degraded"
   */
  redisFailure?: RedisFailureName | undefined;
  /** How long Redis may stay silent with calls waiting before the failure policy answers (the library's `timeoutMs`; 0: no timeout). @default 1000 */
  redisTimeoutMs?: number | undefined;
  /** HTTP port (0: any free port). @default 8080 */
  port?: number | undefined;
  /** gRPC port (0: any free port). @default 8081 */
  grpcPort?: number | undefined;
  /** Interface to listen on. @default "0.0.0.0" */
  host?: string | undefined;
  /** Interface the gRPC port listens on (envoyproxy/ratelimit's `GRPC_HOST`). @default host */
  grpcHost?: string | undefined;
  /** Close a gRPC connection this old (GOAWAY), so clients spread over instances again (its `GRPC_MAX_CONNECTION_AGE`). @default never */
  grpcMaxConnectionAgeMs?: number | undefined;
  /** Time calls in flight then have before the connection closes (its `GRPC_MAX_CONNECTION_AGE_GRACE`). @default unlimited */
  grpcMaxConnectionAgeGraceMs?: number | undefined;
  /** Reload the rules when the file (or a file of the directory) changes. @default true */
  watch?: boolean | undefined;
  /** The in-memory store's bound on its estimated bytes (the library's `MemoryStore` `maxBytes`). @default 268435456 */
  memoryMaxBytes?: number | undefined;
  /** How long a changed rules file must be quiet before it is read, in ms. @default 2000 */
  reloadSettleMs?: number | undefined;
  /** The largest rules file read, at start and on reload, in bytes. @default 4194304 (4 MiB) */
  maxRulesBytes?: number | undefined;
  /** Start on, or apply a reloaded, file or directory with no domain, policy or pool (refused otherwise). @default false */
  allowEmptyRules?: boolean | undefined;
  /** Admin API token (`/v1/admin/*`); without it the admin API is off. */
  adminToken?: string | undefined;
  overrides?: ServiceOverrides | undefined;
  /**
   * The headers Envoy's RLS answers add: ratekeeper's limit headers, or envoyproxy/ratelimit's
   * (`LIMIT_RESPONSE_HEADERS_ENABLED`, with its header names).
   * @default { kind: "ratekeeper" }
   */
  rlsHeaders?: RlsHeaders | undefined;
  /**
   * envoyproxy/ratelimit's global `SHADOW_MODE`: Envoy RLS answers (gRPC, `/json`) are OK overall
   * even over a limit; each descriptor's status still says OVER_LIMIT, and it is counted.
   * @default false
   */
  globalShadowMode?: boolean | undefined;
  /** envoyproxy/ratelimit's `NEAR_LIMIT_RATIO`, for its `near_limit` stat (envoy-stats.ts). @default 0.8 */
  nearLimitRatio?: number | undefined;
  /** Stat keys carrying request values (`detailed_metric`, descriptors' own limits) kept in /metrics before `(overflow)`. @default 1000 */
  maxDetailedMetricKeys?: number | undefined;
  /** Limit header styles (as the middleware's `headers` option). @default ["ietf"] */
  headerStyles?: readonly HeaderStyle[] | undefined;
  /** Time a client has to send a whole request (headers: at most 5 s of it); slower ones get 408. @default 10000 */
  requestTimeoutMs?: number | undefined;
  /** Largest request body in bytes. @default 65536 */
  maxBodyBytes?: number | undefined;
  /** Serve the live dashboard at `/dashboard` (behind `adminToken` when one is set), and count what it shows. @default true */
  dashboard?: boolean | undefined;
  /** How long shutdown waits for in-flight requests before closing them. @default 10000 */
  shutdownTimeoutMs?: number | undefined;
  /**
   * Where the service logs. Without it, a JSON logger to stdout made for the service alone and
   * ended with it: `close()` waits for its held lines (at most 2 s), then lets go of stdout; lines
   * logged to it after that are dropped.
   */
  logger?: Logger | undefined;
}

/** A running service. */
export interface RunningService {
  readonly httpPort: number;
  readonly grpcPort: number;
  readonly service: DecisionService;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Graceful stop: stop accepting, finish in-flight requests, close the store. Idempotent. */
  close(): Promise<void>;
  /** Looks at the rules file (or directory) now, as a change would (for SIGHUP); false when not watched (`watch: false`). */
  checkRules(): boolean;
}

/**
 * Starts the decision service: rules (watched), the store, HTTP and gRPC.
 * @throws RulesError when the rules file is bad (the service never starts on bad rules)
 * @throws RateLimitConfigError naming each bad option (serve-options.ts)
 * @example const svc = await startService({ configFile: "examples/rules.yaml", port: 0, grpcPort: 0 });
 */
export async function startService(options: ServeOptions): Promise<RunningService> {
  checkServeOptions(options);
  if (options.logger) return startWith(options, options.logger);
  // A logger of its own, ended with the service or a failed start: else every start and stop of an embedding application keeps a stdout descriptor.
  const logger = createLogger();
  const running = await startWith(options, logger).catch(async (e: unknown) => {
    await endLog(logger);
    throw e;
  });
  let ended: Promise<void> | undefined;
  return { ...running, close: () => (ended ??= running.close().finally(() => endLog(logger))) };
}

/** {@link startService} once its logger is chosen: the caller's, or the one it made and ends. */
async function startWith(options: ServeOptions, logger: Logger): Promise<RunningService> {
  const metrics = new Metrics({ nearLimitRatio: options.nearLimitRatio, maxValuedKeys: options.maxDetailedMetricKeys });
  // The verdict `config check` gives: size bound per file, empty rules refused unless allowed.
  const { mergeDomains, maxRulesBytes: maxBytes, allowEmptyRules: allowEmpty } = options;
  // Taken before the load: a change made while the service starts (up to 5 s waiting for Redis) is then applied.
  const loadedState = rulesState(options.configFile);
  const rules = loadRulesFile(options.configFile, { mergeDomains, maxBytes, allowEmpty });
  const isDirectory = statSync(options.configFile).isDirectory();
  metrics.rules.set(rules.rules.length);
  metrics.loaded();
  const { store, redis } = await openStore(options, logger, metrics);

  // The dashboard counts through the same observer seam as the metrics (both, through a tee).
  const stats = options.dashboard === false ? undefined : new DashboardStats();
  const observer = stats ? new TeeObserver(metrics, stats) : metrics;
  const service = new DecisionService({ store, rules, overrides: options.overrides?.lookup, observer, logger });
  const core: Core = { options, logger, metrics, service };
  const dashboard = stats ? openDashboard(core, stats, redis) : undefined;
  let closing = false;
  const readiness = (): { ready: boolean; reason?: string } => {
    if (closing) return { ready: false, reason: "shutting down" };
    // Not ready while the Redis store's breaker is not closed: Redis unreachable, or silent
    // (frozen) for its timeout; the pings in redis-store.ts notice that within about 2 s even
    // without traffic. The failure policy still answers the checks that arrive meanwhile.
    if (redis && redis.state() !== "closed") return { ready: false, reason: `redis is down (circuit breaker ${redis.state()})` };
    return { ready: true };
  };

  const http: HttpServer = await createHttpServer({
    service,
    metrics,
    logger,
    readiness,
    maxBodyBytes: options.maxBodyBytes,
    requestTimeoutMs: options.requestTimeoutMs,
    headerStyles: options.headerStyles,
    adminToken: options.adminToken,
    overridesStore: options.overrides?.store,
    rlsHeaders: options.rlsHeaders,
    globalShadow: options.globalShadowMode,
    dashboard,
  });
  const host = options.host ?? "0.0.0.0";
  const httpPort = await listen(http, options.port ?? 8080, host);
  const grpc = grpcServer(core, () => readiness().ready);
  const grpcPort = await bindGrpc(grpc, options.grpcHost ?? host, options.grpcPort ?? 8081).catch((e: unknown) => {
    http.close();
    throw e;
  });
  // A directory (envoyproxy/ratelimit's runtime layout) is watched as a whole: files added, changed, removed.
  const watching = options.watch === false ? undefined : watchConfig(core, isDirectory, loadedState);
  logger.info(
    { httpPort, grpcPort, store: redis ? "redis" : "memory", rules: rules.rules.length, config: options.configFile },
    "listening",
  );

  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing = true;
    closed ??= shutdown({ options, logger, http, grpc, stopWatching: () => watching?.(), dashboard, stats, store, redis });
    return closed;
  };
  return { httpPort, grpcPort, service, metrics, logger, close, checkRules: () => checkSoon(watching) };
}

/** What {@link startService} has built once the decision service is there, for the functions that build the rest. */
interface Core {
  readonly options: ServeOptions;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly service: DecisionService;
}

/** The store: Redis when a connection is given (waiting up to 5 s for it, then going on), else memory. */
async function openStore(
  options: ServeOptions,
  logger: Logger,
  metrics: Metrics,
): Promise<{ store: Store; redis: ServiceRedis | undefined }> {
  const connection =
    options.redis ?? (options.redisUrl ? parseRedisSettings({ url: { value: options.redisUrl, from: "redisUrl" } }) : undefined);
  if (connection) {
    logger.info({ redis: describeRedis(connection) }, "redis store");
    const redis = openServiceRedis({ connection, failure: options.redisFailure, timeoutMs: options.redisTimeoutMs, logger, metrics });
    await redisReady(redis.client, 5_000).catch((e: Error) => logger.warn({ err: e.message }, "redis not reachable yet"));
    return { store: redis.store, redis };
  }
  const memory = new MemoryStore(options.memoryMaxBytes !== undefined ? { maxBytes: options.memoryMaxBytes } : {});
  metrics.watchMemoryStore(memory);
  return { store: memory, redis: undefined };
}

/** Starts counting for the dashboard and makes its routes. */
function openDashboard({ options, logger, service }: Core, stats: DashboardStats, redis: ServiceRedis | undefined): Dashboard {
  const storeHealth = (): StoreHealth =>
    redis ? { kind: "redis", status: redis.client.status, breaker: redis.state() } : { kind: "memory", status: "ready", breaker: null };
  stats.start();
  return createDashboard({
    stats,
    rules: () => service.rules,
    overrides: isOverrideStore(options.overrides?.store) ? options.overrides.store : undefined,
    storeHealth,
    adminToken: options.adminToken,
    logger,
  });
}

/** Listens on `port` (0: any); resolves the port bound. */
function listen(http: HttpServer, port: number, host: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    http.once("error", reject);
    http.listen(port, host, () => {
      http.off("error", reject);
      resolve((http.address() as AddressInfo).port);
    });
  });
}

/** The gRPC server: Envoy's RLS and grpc.health.v1. */
function grpcServer({ options, logger, metrics, service }: Core, healthy: () => boolean): GrpcServer {
  return createGrpcServer({
    service,
    logger,
    healthy,
    headers: options.rlsHeaders,
    globalShadow: options.globalShadowMode,
    metrics,
    maxConnectionAgeMs: options.grpcMaxConnectionAgeMs,
    maxConnectionAgeGraceMs: options.grpcMaxConnectionAgeGraceMs,
  });
}

/** Watches the rules file or directory; returns the function that stops watching. */
function watchConfig({ options, logger, metrics, service }: Core, isDirectory: boolean, loadedState: string | undefined): RulesWatch {
  const reloadOptions: WatchRulesDirOptions = {
    loadedState,
    settleMs: options.reloadSettleMs,
    maxBytes: options.maxRulesBytes,
    allowEmpty: options.allowEmptyRules,
    mergeDomains: options.mergeDomains,
    onLoading: (i) => logger.info({ file: i.file, bytes: i.bytes }, "rules file changed: parsing"),
    onReload: (r) => {
      service.setRules(r);
      metrics.reload(true);
      metrics.rules.set(r.rules.length);
      logger.info({ file: options.configFile, rules: r.rules.length }, "rules reloaded");
    },
    onError: (e) => {
      metrics.reload(false);
      logger.error({ file: options.configFile, errors: e.message.split("\n") }, "rules reload failed: keeping the last good rules");
    },
  };
  return isDirectory ? watchRulesDir(options.configFile, reloadOptions) : watchRules(options.configFile, reloadOptions);
}

/** Asks `watching` to look at the rules now; false when the rules are not watched. */
function checkSoon(watching: RulesWatch | undefined): boolean {
  watching?.checkSoon();
  return watching !== undefined;
}

/** What a graceful stop closes. */
interface Running {
  readonly options: ServeOptions;
  readonly logger: Logger;
  readonly http: HttpServer;
  readonly grpc: GrpcServer;
  readonly stopWatching: () => void;
  readonly dashboard: Dashboard | undefined;
  readonly stats: DashboardStats | undefined;
  readonly store: Store;
  readonly redis: ServiceRedis | undefined;
}

/** Stops accepting, lets in-flight requests finish (closing them after the shutdown timeout), then closes the stores. */
async function shutdown(r: Running): Promise<void> {
  const { options, logger, http, grpc } = r;
  r.stopWatching();
  // Event streams never end by themselves: end them so the HTTP server can close.
  r.dashboard?.close();
  r.stats?.stop();
  const timeoutMs = options.shutdownTimeoutMs ?? 10_000;
  // Stop accepting; in-flight requests finish; idle keep-alive sockets are closed now,
  // busy ones after their response (node closes them once idle during close()).
  const httpDone = new Promise<void>((resolve) => http.close(() => resolve()));
  http.closeIdleConnections();
  const grpcDone = new Promise<void>((resolve) => grpc.tryShutdown(() => resolve()));
  const force = setTimeout(() => {
    logStopping(logger, () => logger.warn("shutdown timeout: closing remaining connections"));
    http.closeAllConnections();
    grpc.forceShutdown();
  }, timeoutMs);
  force.unref();
  await Promise.all([httpDone, grpcDone]);
  clearTimeout(force);
  await options.overrides?.close();
  if (r.redis) await r.redis.close();
  else (r.store as MemoryStore).close();
  logStopping(logger, () => logger.info("stopped"));
}

function isOverrideStore(s: unknown): s is OverrideStore {
  return typeof s === "object" && s !== null && typeof (s as OverrideStore).list === "function";
}
