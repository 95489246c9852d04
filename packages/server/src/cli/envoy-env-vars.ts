/**
 * Every environment variable of envoyproxy/ratelimit (its src/settings/settings.go), and what
 * `ratekeeper serve` does with it: `mapped` onto a flag or a behaviour ratekeeper has, or
 * `answered`: not used, with the equivalent to use instead. cli/envoy-env.ts applies it at start
 * and logs one line for each variable that is set; docs/migrating-from-envoy-ratelimit.md
 * ("Environment variables") is this table in prose (a test keeps the two in step).
 */

/** What ratekeeper does with one value of a variable. */
export interface EnvVerdict {
  readonly kind: "mapped" | "answered";
  /** One sentence: the flag it sets, or why it is not used and what to use instead. */
  readonly text: string;
}

/** One variable of envoyproxy/ratelimit. */
export interface EnvVar {
  readonly name: string;
  /** What ratekeeper does with it, for the docs table. */
  readonly doc: string;
  /** The verdict for a value (the default: `mapped` with `doc`). */
  readonly verdict?: (value: string) => EnvVerdict;
}

const mapped = (text: string): EnvVerdict => ({ kind: "mapped", text });
const answered = (text: string): EnvVerdict => ({ kind: "answered", text });
const isTrue = (v: string): boolean => /^(1|t|true)$/i.test(v.trim());

/** Variables read by the Redis connection settings (cli/redis-flags.ts), not by this table. */
export const REDIS_CONNECTION_VARS = [
  "REDIS_URL",
  "REDIS_TYPE",
  "REDIS_AUTH",
  "REDIS_SENTINEL_AUTH",
  "REDIS_SOCKET_TYPE",
  "REDIS_TLS",
  "REDIS_TLS_CACERT",
  "REDIS_TLS_CLIENT_CERT",
  "REDIS_TLS_CLIENT_KEY",
  "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
] as const;

const NO_STATSD = "stats are Prometheus counters on the HTTP port's /metrics (its names: ratelimit_service_rate_limit_*); no statsd";
const XDS = "configuration comes from files (--config or RUNTIME_ROOT), hot-reloaded; xDS is not supported";
const ONE_REDIS = "ratekeeper keeps every limit, per-second ones included, in the one Redis of REDIS_URL";
const POOL = "ratekeeper uses one auto-pipelined connection per Redis node (ioredis); no pool to size";
const TLS_GRPC = "the gRPC port serves plaintext; put TLS in front (an Envoy sidecar, a service mesh)";

/**
 * The table. Names are envoyproxy/ratelimit's; the order is its settings.go's. Families handled
 * alike (every `CONFIG_GRPC_XDS_*`, ...) are in {@link ENV_PREFIXES}.
 */
export const ENV_VARS: readonly EnvVar[] = [
  { name: "HOST", doc: "--host: the HTTP interface" },
  { name: "PORT", doc: "--port: the HTTP port" },
  {
    name: "DEBUG_HOST",
    doc: "not used: no debug port; /metrics, /v1/rules and /dashboard are on the HTTP port",
    verdict: () => answered("not used: no debug port; /metrics, /v1/rules and /dashboard are on the HTTP port"),
  },
  {
    name: "DEBUG_PORT",
    doc: "not used: no debug port; /metrics, /v1/rules and /dashboard are on the HTTP port",
    verdict: () => answered("not used: no debug port; /metrics, /v1/rules and /dashboard are on the HTTP port"),
  },
  {
    name: "GRPC_UDS",
    doc: "not used: gRPC listens on GRPC_HOST:GRPC_PORT (TCP), not a unix socket",
    verdict: (v) =>
      v === "" ? mapped("empty: TCP, as the default") : answered("not used: gRPC listens on GRPC_HOST:GRPC_PORT (TCP), not a unix socket"),
  },
  { name: "GRPC_HOST", doc: "--grpc-host: the gRPC interface" },
  { name: "GRPC_PORT", doc: "--grpc-port: the gRPC port" },
  { name: "GRPC_MAX_CONNECTION_AGE", doc: "--grpc-max-connection-age: a gRPC connection this old is closed (GOAWAY)" },
  { name: "GRPC_MAX_CONNECTION_AGE_GRACE", doc: "--grpc-max-connection-age-grace: the time calls in flight then have" },
  {
    name: "GRPC_SERVER_USE_TLS",
    doc: `not used: ${TLS_GRPC}`,
    verdict: (v) => (isTrue(v) ? answered(`not used: ${TLS_GRPC}`) : mapped("false: plaintext, as ratekeeper serves")),
  },
  { name: "GRPC_SERVER_TLS_CERT", doc: `not used: ${TLS_GRPC}`, verdict: () => answered(`not used: ${TLS_GRPC}`) },
  { name: "GRPC_SERVER_TLS_KEY", doc: `not used: ${TLS_GRPC}`, verdict: () => answered(`not used: ${TLS_GRPC}`) },
  { name: "GRPC_CLIENT_TLS_CACERT", doc: `not used: ${TLS_GRPC}`, verdict: () => answered(`not used: ${TLS_GRPC}`) },
  { name: "GRPC_CLIENT_TLS_SAN", doc: `not used: ${TLS_GRPC}`, verdict: () => answered(`not used: ${TLS_GRPC}`) },
  { name: "LOG_LEVEL", doc: "the log level (debug, info, warn, error; any case; warning is warn, panic is fatal)" },
  {
    name: "LOG_FORMAT",
    doc: "not used: logs are JSON lines",
    verdict: (v) => (v.toLowerCase() === "json" ? mapped("json: logs are JSON lines") : answered("not used: logs are JSON lines (pino)")),
  },
  {
    name: "CONFIG_TYPE",
    doc: "FILE: the rules directory; GRPC_XDS_SOTW is not supported",
    verdict: (v) =>
      v.toUpperCase() === "FILE" ? mapped("FILE: the rules directory (RUNTIME_ROOT) or --config") : answered(`not used: ${XDS}`),
  },
  {
    name: "FORCE_START_WITHOUT_INITIAL_CONFIG",
    doc: "not used: the service starts only with good rules (without any: the built-in default rules)",
    verdict: (v) =>
      isTrue(v)
        ? answered("not used: the service starts only with good rules (without --config or RUNTIME_ROOT: the built-in default rules)")
        : mapped("false: the service starts only with good rules"),
  },
  {
    name: "USE_DOG_STATSD",
    doc: `not used: ${NO_STATSD}`,
    verdict: (v) => (isTrue(v) ? answered(`not used: ${NO_STATSD}`) : mapped("false: no statsd, as ratekeeper")),
  },
  { name: "USE_DOG_STATSD_MOGRIFIERS", doc: `not used: ${NO_STATSD}`, verdict: () => answered(`not used: ${NO_STATSD}`) },
  {
    name: "USE_STATSD",
    doc: `not used: ${NO_STATSD}`,
    verdict: (v) => (isTrue(v) ? answered(`not used: ${NO_STATSD}`) : mapped("false: no statsd, as ratekeeper")),
  },
  { name: "STATSD_HOST", doc: `not used: ${NO_STATSD}`, verdict: () => answered(`not used: ${NO_STATSD}`) },
  { name: "STATSD_PORT", doc: `not used: ${NO_STATSD}`, verdict: () => answered(`not used: ${NO_STATSD}`) },
  {
    name: "EXTRA_TAGS",
    doc: "not used: add labels in Prometheus's scrape config (relabelling)",
    verdict: () => answered("not used: add labels in Prometheus's scrape config (relabelling)"),
  },
  {
    name: "STATS_FLUSH_INTERVAL",
    doc: "not used: /metrics is read when scraped",
    verdict: () => answered("not used: /metrics is read when scraped"),
  },
  {
    name: "DISABLE_STATS",
    doc: "not used: /metrics is always served (nothing is sent anywhere)",
    verdict: (v) =>
      isTrue(v) ? answered("not used: /metrics is always served (nothing is sent anywhere)") : mapped("false: /metrics is served"),
  },
  {
    name: "USE_PROMETHEUS",
    doc: "its counters are on the HTTP port's /metrics, whatever the value",
    verdict: () => mapped("its counters are on the HTTP port's /metrics (not PROMETHEUS_ADDR)"),
  },
  {
    name: "PROMETHEUS_ADDR",
    doc: "not used: /metrics is on the HTTP port (PORT)",
    verdict: () => answered("not used: /metrics is on the HTTP port (PORT)"),
  },
  {
    name: "PROMETHEUS_PATH",
    doc: "not used: the path is /metrics",
    verdict: (v) => (v === "/metrics" ? mapped("/metrics, as ratekeeper") : answered("not used: the path is /metrics")),
  },
  {
    name: "PROMETHEUS_MAPPER_YAML",
    doc: "not used: the names are its default mapper's",
    verdict: () => answered("not used: the names and labels are its default mapper's (ratelimit_service_rate_limit_*{domain,key1,key2})"),
  },
  {
    name: "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
    doc: "not used: no response-time histogram of its name; ratekeeper_store_latency_seconds is in seconds",
    verdict: () => answered("not used: no response-time histogram of its name; ratekeeper_store_latency_seconds is in seconds"),
  },
  { name: "RUNTIME_ROOT", doc: "--config RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY (when --config is not given)" },
  { name: "RUNTIME_SUBDIRECTORY", doc: "part of the --config directory (see RUNTIME_ROOT)" },
  { name: "RUNTIME_APPDIRECTORY", doc: "part of the --config directory (see RUNTIME_ROOT; default config)" },
  {
    name: "RUNTIME_IGNOREDOTFILES",
    doc: "dotfiles are always skipped",
    verdict: (v) =>
      isTrue(v)
        ? mapped("true: dotfiles are skipped, as ratekeeper always does")
        : answered("not used: ratekeeper always skips dotfiles (and ..data-style entries)"),
  },
  {
    name: "RUNTIME_WATCH_ROOT",
    doc: "either way the config directory is read (the files under RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config)",
    verdict: () => mapped("either way the config directory is read: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY"),
  },
  {
    name: "EXPIRATION_JITTER_MAX_SECONDS",
    doc: "not used: each key expires when its window ends",
    verdict: () => answered("not used: each Redis key expires when its window ends (plus a few seconds)"),
  },
  {
    name: "LOCAL_CACHE_SIZE_IN_BYTES",
    doc: "not used: denials are decided by one Lua call; the library's RedisStore denialCache is the same idea",
    verdict: (v) =>
      v.trim() === "0"
        ? mapped("0: no local cache, as ratekeeper")
        : answered("not used: no local over-limit cache in the service (the library's RedisStore denialCache is the same idea)"),
  },
  { name: "NEAR_LIMIT_RATIO", doc: "--near-limit-ratio: the near_limit stat's threshold" },
  {
    name: "CACHE_KEY_PREFIX",
    doc: "not used: ratekeeper's Redis keys are rk:{<policy>:<descriptor>}:<n>",
    verdict: () =>
      answered(
        "not used: ratekeeper's Redis keys are rk:{<policy>:<descriptor>}:<n>; they cannot share envoyproxy/ratelimit's counters anyway",
      ),
  },
  {
    name: "BACKEND_TYPE",
    doc: "redis: the Redis store (with REDIS_URL); memcache is not supported",
    verdict: (v) =>
      v.toLowerCase() === "redis"
        ? mapped("redis: the Redis store when REDIS_URL is set (otherwise the in-memory store)")
        : answered("not used: the store is Redis (REDIS_URL) or in memory; memcache is not supported"),
  },
  {
    name: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
    doc: "always so: a denied request is never charged",
    verdict: () => mapped("always so in ratekeeper: a denied request is never charged"),
  },
  { name: "LIMIT_RESPONSE_HEADERS_ENABLED", doc: "--rls-headers envoy (true) or none (false): its response headers on RLS answers" },
  { name: "LIMIT_LIMIT_HEADER", doc: "--rls-header-names: the limit header's name" },
  { name: "LIMIT_REMAINING_HEADER", doc: "--rls-header-names: the remaining header's name" },
  { name: "LIMIT_RESET_HEADER", doc: "--rls-header-names: the reset header's name" },
  {
    name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
    doc: "always so: the service starts only with rules loaded",
    verdict: () => mapped("always so: the service starts only with rules loaded"),
  },
  ...REDIS_CONNECTION_VARS.map((name) => ({
    name,
    doc: "the Redis connection, with REDIS_URL (--redis and its settings; docs/service.md, Redis topologies)",
    verdict: () => mapped("read by the Redis connection settings (--redis; docs/service.md, Redis topologies)"),
  })),
  { name: "REDIS_POOL_SIZE", doc: `not used: ${POOL}`, verdict: () => answered(`not used: ${POOL}`) },
  { name: "REDIS_PIPELINE_WINDOW", doc: `not used: ${POOL}`, verdict: () => answered(`not used: ${POOL}`) },
  { name: "REDIS_PIPELINE_LIMIT", doc: `not used: ${POOL}`, verdict: () => answered(`not used: ${POOL}`) },
  { name: "REDIS_CLUSTER_PIPELINE_PARALLELISM", doc: `not used: ${POOL}`, verdict: () => answered(`not used: ${POOL}`) },
  {
    name: "REDIS_PERSECOND",
    doc: `not used: ${ONE_REDIS}`,
    verdict: (v) => (isTrue(v) ? answered(`not used: ${ONE_REDIS}`) : mapped("false: one Redis, as ratekeeper")),
  },
  {
    name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
    doc: "always so: Redis is pinged every 500 ms and /healthcheck, /readyz follow it",
    verdict: () => mapped("always so: Redis is pinged every 500 ms and /healthcheck, /readyz follow it"),
  },
  { name: "REDIS_TIMEOUT", doc: "--redis-timeout: how long Redis may stay silent before the failure policy answers" },
  { name: "REDIS_POOL_ON_EMPTY_BEHAVIOR", doc: `not used: ${POOL}`, verdict: () => answered(`not used: ${POOL}`) },
  {
    name: "SHADOW_MODE",
    doc: "--global-shadow-mode (true): Envoy RLS answers are OK overall even over a limit; the descriptors' statuses still say OVER_LIMIT",
  },
  {
    name: "QUOTA_MODE",
    doc: "not used: quota mode is not supported globally (a descriptor's `quota_mode: true` is)",
    verdict: (v) =>
      isTrue(v)
        ? answered("not used: quota mode is not supported globally (a descriptor's quota_mode: true is); requests over a limit are denied")
        : mapped("false: no quota mode"),
  },
  {
    name: "RESPONSE_DYNAMIC_METADATA",
    doc: "not used: RLS answers carry no dynamic_metadata",
    verdict: (v) => (isTrue(v) ? answered("not used: RLS answers carry no dynamic_metadata") : mapped("false: no dynamic_metadata")),
  },
  { name: "MERGE_DOMAIN_CONFIG", doc: "a domain split over several files is merged (true) or refused (false)" },
];

/** Families of variables, by prefix, each answered alike. */
export const ENV_PREFIXES: ReadonlyArray<{ readonly prefix: string; readonly doc: string }> = [
  { prefix: "CONFIG_GRPC_XDS_", doc: `not used: ${XDS}` },
  { prefix: "XDS_CLIENT_", doc: `not used: ${XDS}` },
  { prefix: "REDIS_PERSECOND_", doc: `not used: ${ONE_REDIS}` },
  {
    prefix: "REDIS_STARTUP_",
    doc: "not used: the service starts at once and reconnects to Redis every 50-500 ms; /readyz says when it answers",
  },
  { prefix: "MEMCACHE_", doc: "not used: memcache is not supported; the store is Redis (REDIS_URL) or in memory" },
  { prefix: "TRACING_", doc: "not used: no OpenTelemetry tracing" },
];

/** The verdict for a set variable, or undefined when it is not one of envoyproxy/ratelimit's. */
export function verdictFor(name: string, value: string): EnvVerdict | undefined {
  const v = ENV_VARS.find((x) => x.name === name);
  if (v) return v.verdict ? v.verdict(value) : mapped(v.doc);
  const family = ENV_PREFIXES.find((p) => name.startsWith(p.prefix));
  return family ? answered(family.doc) : undefined;
}
