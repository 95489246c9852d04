/**
 * envoyproxy/ratelimit's environment variables: each one it has (its src/settings/settings.go,
 * names listed below) is mapped onto a `ratekeeper serve` flag or answered with one log line at
 * start naming what to use instead; none is silently ignored, none stops the service; a mapped
 * one with a bad value is refused naming the variable. The docs table lists every one.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { envoyEnvironment, goDurationMs } from "../src/cli/envoy-env.js";
import { ENV_PREFIXES, ENV_VARS } from "../src/cli/envoy-env-vars.js";
import { ROOT, rlsClient, startServiceProcess, type ServiceProc } from "./support.js";

/** envoyproxy/ratelimit's variables and their defaults (src/settings/settings.go at f2fb157). */
const SETTINGS: Record<string, string> = {
  HOST: "0.0.0.0",
  PORT: "8080",
  DEBUG_HOST: "0.0.0.0",
  DEBUG_PORT: "6070",
  GRPC_UDS: "",
  GRPC_HOST: "0.0.0.0",
  GRPC_PORT: "8081",
  GRPC_MAX_CONNECTION_AGE: "24h",
  GRPC_MAX_CONNECTION_AGE_GRACE: "1h",
  GRPC_SERVER_USE_TLS: "false",
  GRPC_SERVER_TLS_CERT: "",
  GRPC_SERVER_TLS_KEY: "",
  GRPC_CLIENT_TLS_CACERT: "",
  GRPC_CLIENT_TLS_SAN: "",
  LOG_LEVEL: "WARN",
  LOG_FORMAT: "text",
  CONFIG_TYPE: "FILE",
  FORCE_START_WITHOUT_INITIAL_CONFIG: "false",
  CONFIG_GRPC_XDS_NODE_ID: "default",
  CONFIG_GRPC_XDS_NODE_METADATA: "",
  CONFIG_GRPC_XDS_SERVER_URL: "localhost:18000",
  CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: "3s",
  CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: "",
  CONFIG_GRPC_XDS_SERVER_USE_TLS: "false",
  CONFIG_GRPC_XDS_CLIENT_TLS_CERT: "",
  CONFIG_GRPC_XDS_CLIENT_TLS_KEY: "",
  CONFIG_GRPC_XDS_SERVER_TLS_CACERT: "",
  CONFIG_GRPC_XDS_SERVER_TLS_SAN: "",
  XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "10s",
  XDS_CLIENT_BACKOFF_MAX_INTERVAL: "60s",
  XDS_CLIENT_BACKOFF_RANDOM_FACTOR: "0.5",
  XDS_CLIENT_BACKOFF_JITTER: "true",
  XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: "",
  USE_DOG_STATSD: "false",
  USE_DOG_STATSD_MOGRIFIERS: "",
  USE_STATSD: "true",
  STATSD_HOST: "localhost",
  STATSD_PORT: "8125",
  EXTRA_TAGS: "",
  STATS_FLUSH_INTERVAL: "10s",
  DISABLE_STATS: "false",
  USE_PROMETHEUS: "false",
  PROMETHEUS_ADDR: ":9090",
  PROMETHEUS_PATH: "/metrics",
  PROMETHEUS_MAPPER_YAML: "",
  PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: "false",
  RUNTIME_ROOT: "/srv/runtime_data/current",
  RUNTIME_SUBDIRECTORY: "",
  RUNTIME_APPDIRECTORY: "config",
  RUNTIME_IGNOREDOTFILES: "false",
  RUNTIME_WATCH_ROOT: "true",
  EXPIRATION_JITTER_MAX_SECONDS: "300",
  LOCAL_CACHE_SIZE_IN_BYTES: "0",
  NEAR_LIMIT_RATIO: "0.8",
  CACHE_KEY_PREFIX: "",
  BACKEND_TYPE: "redis",
  STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: "false",
  LIMIT_RESPONSE_HEADERS_ENABLED: "false",
  LIMIT_LIMIT_HEADER: "RateLimit-Limit",
  LIMIT_REMAINING_HEADER: "RateLimit-Remaining",
  LIMIT_RESET_HEADER: "RateLimit-Reset",
  HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: "false",
  REDIS_SOCKET_TYPE: "unix",
  REDIS_TYPE: "SINGLE",
  REDIS_URL: "/var/run/nutcracker/ratelimit.sock",
  REDIS_POOL_SIZE: "10",
  REDIS_AUTH: "",
  REDIS_TLS: "false",
  REDIS_TLS_CLIENT_CERT: "",
  REDIS_TLS_CLIENT_KEY: "",
  REDIS_TLS_CACERT: "",
  REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: "false",
  REDIS_PIPELINE_WINDOW: "0",
  REDIS_PIPELINE_LIMIT: "0",
  REDIS_CLUSTER_PIPELINE_PARALLELISM: "1",
  REDIS_PERSECOND: "false",
  REDIS_PERSECOND_SOCKET_TYPE: "unix",
  REDIS_PERSECOND_TYPE: "SINGLE",
  REDIS_PERSECOND_URL: "/var/run/nutcracker/ratelimitpersecond.sock",
  REDIS_PERSECOND_POOL_SIZE: "10",
  REDIS_PERSECOND_AUTH: "",
  REDIS_PERSECOND_TLS: "false",
  REDIS_SENTINEL_AUTH: "",
  REDIS_PERSECOND_SENTINEL_AUTH: "",
  REDIS_PERSECOND_PIPELINE_WINDOW: "0",
  REDIS_PERSECOND_PIPELINE_LIMIT: "0",
  REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM: "1",
  REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: "false",
  REDIS_TIMEOUT: "10s",
  REDIS_PERSECOND_TIMEOUT: "10s",
  REDIS_POOL_ON_EMPTY_BEHAVIOR: "WAIT",
  REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR: "WAIT",
  REDIS_STARTUP_INITIAL_INTERVAL: "1s",
  REDIS_STARTUP_MAX_INTERVAL: "30s",
  REDIS_STARTUP_MAX_ELAPSED_TIME: "0",
  MEMCACHE_HOST_PORT: "",
  MEMCACHE_MAX_IDLE_CONNS: "2",
  MEMCACHE_SRV: "",
  MEMCACHE_SRV_REFRESH: "0",
  MEMCACHE_TLS: "false",
  MEMCACHE_TLS_CLIENT_CERT: "",
  MEMCACHE_TLS_CLIENT_KEY: "",
  MEMCACHE_TLS_CACERT: "",
  MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION: "false",
  SHADOW_MODE: "false",
  QUOTA_MODE: "false",
  RESPONSE_DYNAMIC_METADATA: "false",
  MERGE_DOMAIN_CONFIG: "false",
  TRACING_ENABLED: "false",
  TRACING_SERVICE_NAME: "RateLimit",
  TRACING_SERVICE_NAMESPACE: "",
  TRACING_SERVICE_INSTANCE_ID: "",
  TRACING_EXPORTER_PROTOCOL: "http",
  TRACING_SAMPLING_RATE: "1",
};

describe("every variable of envoyproxy/ratelimit is mapped or answered", () => {
  it("each one, set to its default, gets exactly one line, and nothing throws", () => {
    const r = envoyEnvironment(SETTINGS, {});
    const seen = r.lines.map((l) => l.variable).sort();
    expect(seen).toEqual(Object.keys(SETTINGS).sort());
    for (const l of r.lines) expect(l.msg).toMatch(new RegExp(`^envoyproxy/ratelimit variable ${l.variable}: .{10,}`));
  });

  it("the unused ones are warnings that say what to use instead", () => {
    const r = envoyEnvironment(
      { USE_STATSD: "true", GRPC_SERVER_USE_TLS: "true", QUOTA_MODE: "true", MEMCACHE_HOST_PORT: "m:11211", DEBUG_PORT: "6070" },
      {},
    );
    const by = Object.fromEntries(r.lines.map((l) => [l.variable, l]));
    expect(by.USE_STATSD).toMatchObject({ level: "warn", msg: expect.stringMatching(/\/metrics/) });
    expect(by.GRPC_SERVER_USE_TLS).toMatchObject({ level: "warn", msg: expect.stringMatching(/TLS in front/) });
    expect(by.QUOTA_MODE).toMatchObject({ level: "warn", msg: expect.stringMatching(/quota mode is not supported/) });
    expect(by.MEMCACHE_HOST_PORT).toMatchObject({ level: "warn", msg: expect.stringMatching(/memcache is not supported/) });
    expect(by.DEBUG_PORT).toMatchObject({ level: "warn", msg: expect.stringMatching(/HTTP port/) });
  });

  it("variables that are not its own are left alone; secrets are not echoed", () => {
    const r = envoyEnvironment({ HOME: "/root", PATH: "/bin", REDIS_AUTH: "s3cret", REDIS_URL: "redis://:pw@h:6379" }, {});
    expect(r.lines.map((l) => l.variable).sort()).toEqual(["REDIS_AUTH", "REDIS_URL"]);
    expect(JSON.stringify(r.lines)).not.toMatch(/s3cret|pw@/);
  });
});

describe("the mapped ones become flags (the command line wins)", () => {
  it("ports, hosts, NEAR_LIMIT_RATIO, REDIS_TIMEOUT, the RUNTIME_* directory, the response headers", () => {
    const r = envoyEnvironment(
      {
        PORT: "9000",
        GRPC_PORT: "9001",
        HOST: "127.0.0.2",
        GRPC_HOST: "127.0.0.3",
        NEAR_LIMIT_RATIO: "0.5",
        REDIS_TIMEOUT: "1m30s",
        RUNTIME_ROOT: "/data",
        RUNTIME_SUBDIRECTORY: "ratelimit",
        LIMIT_RESPONSE_HEADERS_ENABLED: "true",
        LIMIT_REMAINING_HEADER: "X-Left",
      },
      { port: "7000" },
    );
    expect(r.flags).toEqual({
      "grpc-port": "9001",
      host: "127.0.0.2",
      "grpc-host": "127.0.0.3",
      "near-limit-ratio": "0.5",
      "redis-timeout": "90000",
      config: path.join("/data", "ratelimit", "config"),
      "rls-headers": "envoy",
      "rls-header-names": "RateLimit-Limit,X-Left,RateLimit-Reset",
    });
    expect(r.lines.find((l) => l.variable === "PORT")?.msg).toMatch(/--port on the command line wins/);
  });

  it("RUNTIME_APPDIRECTORY and the default root; LIMIT_RESPONSE_HEADERS_ENABLED=false is no headers; LOG_LEVEL in logrus's names", () => {
    expect(envoyEnvironment({ RUNTIME_SUBDIRECTORY: "rl", RUNTIME_APPDIRECTORY: "limits" }, {}).flags.config).toBe(
      path.join("/srv/runtime_data/current", "rl", "limits"),
    );
    expect(envoyEnvironment({ LIMIT_RESPONSE_HEADERS_ENABLED: "false" }, {}).flags["rls-headers"]).toBe("none");
    expect(envoyEnvironment({ LOG_LEVEL: "WARNING" }, {}).logLevel).toBe("warn");
    expect(envoyEnvironment({ LOG_LEVEL: "panic" }, {}).logLevel).toBe("fatal");
    const bogus = envoyEnvironment({ LOG_LEVEL: "loud" }, {});
    expect(bogus.logLevel).toBeUndefined();
    expect(bogus.lines[0]).toMatchObject({ level: "warn", variable: "LOG_LEVEL" });
  });

  it("a mapped variable with a bad value is refused naming it", () => {
    expect(() => envoyEnvironment({ PORT: "http" }, {})).toThrow(/^PORT: must be a port number/);
    expect(() => envoyEnvironment({ NEAR_LIMIT_RATIO: "80%" }, {})).toThrow(/^NEAR_LIMIT_RATIO: must be a decimal number from 0 to 1/);
    expect(() => envoyEnvironment({ REDIS_TIMEOUT: "10" }, {})).toThrow(/^REDIS_TIMEOUT: must be a duration/);
    expect(goDurationMs("500ms", "X")).toBe(500);
    expect(goDurationMs("1.5h", "X")).toBe(5_400_000);
  });
});

describe("docs/migrating-from-envoy-ratelimit.md, Environment variables", () => {
  it("has a row for every variable and family of the table", () => {
    const doc = readFileSync(path.join(ROOT, "docs/migrating-from-envoy-ratelimit.md"), "utf8");
    const at = doc.indexOf("## Environment variables");
    expect(at).toBeGreaterThan(0);
    const section = doc.slice(at);
    for (const v of ENV_VARS) expect(section, v.name).toContain(`| \`${v.name}\` |`);
    for (const p of ENV_PREFIXES) expect(section, p.prefix).toContain(`| \`${p.prefix}*\` |`);
  });
});

describe("ratekeeper serve with envoyproxy/ratelimit's environment", () => {
  let dir: string;
  let svc: ServiceProc;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "rk-envoy-env-"));
    mkdirSync(path.join(dir, "ratelimit", "config"), { recursive: true });
    writeFileSync(
      path.join(dir, "ratelimit", "config", "rl.yaml"),
      "domain: rl\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n",
    );
    svc = await startServiceProcess([], {
      RUNTIME_ROOT: dir,
      RUNTIME_SUBDIRECTORY: "ratelimit",
      RUNTIME_WATCH_ROOT: "false",
      USE_STATSD: "true",
      GRPC_SERVER_USE_TLS: "true",
      LIMIT_RESPONSE_HEADERS_ENABLED: "true",
      LIMIT_REMAINING_HEADER: "X-Left",
      LOG_LEVEL: "Info",
    });
  });
  afterAll(async () => {
    await svc?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("serves the RUNTIME_* directory, answers with its header names, and logs one line per variable", async () => {
    const c = rlsClient(svc.grpcPort);
    try {
      const r = await c.shouldRateLimit({ domain: "rl", descriptors: [{ entries: [{ key: "user", value: "a" }] }] });
      expect(r.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 1, current_limit: { requests_per_unit: 2 } });
      expect(r.response_headers_to_add.map((h: { key: string }) => h.key)).toEqual(["RateLimit-Limit", "X-Left", "RateLimit-Reset"]);
    } finally {
      c.close();
    }
    const logged = svc.lines
      .filter((l) => l.includes("envoyproxy/ratelimit variable"))
      .map((l) => JSON.parse(l) as { variable: string; level: number; msg: string });
    const by = Object.fromEntries(logged.map((l) => [l.variable, l]));
    for (const v of [
      "RUNTIME_ROOT",
      "RUNTIME_SUBDIRECTORY",
      "RUNTIME_WATCH_ROOT",
      "USE_STATSD",
      "GRPC_SERVER_USE_TLS",
      "LIMIT_RESPONSE_HEADERS_ENABLED",
      "LIMIT_REMAINING_HEADER",
      "LOG_LEVEL",
    ])
      expect(by[v], v).toBeDefined();
    expect(by.USE_STATSD?.level).toBe(40);
    expect(by.GRPC_SERVER_USE_TLS?.msg).toMatch(/plaintext/);
    expect(by.RUNTIME_ROOT?.msg).toContain(path.join(dir, "ratelimit", "config"));
  });
});
