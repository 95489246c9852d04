/**
 * `ratekeeper serve`'s Redis flags and the environment variables envoyproxy/ratelimit reads for the
 * same settings. A flag wins over its variable; a mistake is a UsageError naming the one given.
 */
import { readSecretFile } from "./read-secret.js";
import { RedisSettingsError, parseRedisSettings, type Given, type RedisConnection, type RedisSettings } from "../redis-connection.js";
import { UsageError, str, type Flags, type Values } from "./command.js";

export const REDIS_FLAGS: Flags = {
  redis: { type: "string" },
  "redis-type": { type: "string" },
  "redis-sentinel-master": { type: "string" },
  "redis-tls-ca": { type: "string" },
  "redis-tls-cert": { type: "string" },
  "redis-tls-key": { type: "string" },
  "redis-tls-skip-hostname-verification": { type: "boolean" },
};

export const REDIS_FLAG_HELP: Readonly<Record<string, string>> = {
  redis:
    "URL  share state in Redis: redis://[user:password@]host:6379[/db], rediss:// for TLS; a Cluster's or the sentinels' hosts comma-separated (redis://a:7000,b:7001); default: in-memory store [env REDIS_URL, also as host:port,host:port]",
  "redis-type":
    "TYPE  single, cluster (the URL's hosts are seeds) or sentinel (they are sentinels) [env REDIS_TYPE, default single]; password in the URL or REDIS_AUTH (password or user:password), the sentinels' in REDIS_SENTINEL_AUTH",
  "redis-sentinel-master": "NAME  the master the sentinels monitor (or first in REDIS_URL: NAME,host:26379,...)",
  "redis-tls-ca":
    "FILE  CA certificates (PEM) the Redis servers' certificates are checked against [env REDIS_TLS_CACERT; TLS: rediss:// or REDIS_TLS=true]",
  "redis-tls-cert": "FILE  client certificate (PEM) for mutual TLS [env REDIS_TLS_CLIENT_CERT]",
  "redis-tls-key": "FILE  its private key (PEM) [env REDIS_TLS_CLIENT_KEY]",
  "redis-tls-skip-hostname-verification":
    "check the servers' certificate chain but not the host name (Cluster nodes are announced by IP) [env REDIS_TLS_SKIP_HOSTNAME_VERIFICATION]",
};

/**
 * The Redis connection from the flags and the environment, or undefined when neither `--redis`
 * nor REDIS_URL is given (the memory store). A Redis flag without a URL is a mistake; REDIS_*
 * variables without REDIS_URL are ignored (a manifest may set them for envoyproxy/ratelimit's defaults).
 */
export function redisFromCommandLine(v: Values, env: NodeJS.ProcessEnv): RedisConnection | undefined {
  const pick = (flag: string, variable?: string): Given | undefined => {
    const f = v[flag] === true ? "true" : str(v[flag]);
    if (f !== undefined) return { value: f, from: `--${flag}` };
    const e = variable === undefined ? undefined : env[variable];
    return e !== undefined && e !== "" ? { value: e, from: variable as string } : undefined;
  };
  const url = pick("redis", "REDIS_URL");
  if (url === undefined) {
    const stray = Object.keys(REDIS_FLAGS).find((f) => v[f] !== undefined);
    if (stray) throw new UsageError(`--${stray}: needs --redis URL (or REDIS_URL)`);
    return undefined;
  }
  const settings: RedisSettings = {
    url,
    type: pick("redis-type", "REDIS_TYPE"),
    sentinelMaster: pick("redis-sentinel-master"),
    auth: pick("", "REDIS_AUTH"),
    sentinelAuth: pick("", "REDIS_SENTINEL_AUTH"),
    tls: pick("", "REDIS_TLS"),
    socketType: pick("", "REDIS_SOCKET_TYPE"),
    tlsCa: pick("redis-tls-ca", "REDIS_TLS_CACERT"),
    tlsCert: pick("redis-tls-cert", "REDIS_TLS_CLIENT_CERT"),
    tlsKey: pick("redis-tls-key", "REDIS_TLS_CLIENT_KEY"),
    tlsSkipHostnameVerification: pick("redis-tls-skip-hostname-verification", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"),
  };
  try {
    return parseRedisSettings(settings, (file) => readSecretFile(file));
  } catch (e) {
    if (e instanceof RedisSettingsError) throw new UsageError(e.message);
    throw e;
  }
}
