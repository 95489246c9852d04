/**
 * Which Redis the service shares its state in, and how it connects: a single Redis, a Redis
 * Cluster, or a Redis whose master Sentinel chooses; with a password (or an ACL user) and TLS.
 * The settings are read as envoyproxy/ratelimit reads them (REDIS_TYPE, REDIS_URL with several
 * comma-separated `host:port`, the Sentinel master's name first; REDIS_AUTH as `password` or
 * `user:password`; REDIS_TLS and its certificate files; see its src/settings/settings.go and
 * src/redis/driver_impl.go) and as our URLs say them (`redis://`, `rediss://` for TLS, several
 * hosts after one scheme). No I/O but the certificate files it is given a reader for; the ioredis
 * client each topology needs is built in redis-client.ts.
 */

/** The topologies: envoyproxy/ratelimit's REDIS_TYPE values (case-insensitive there and here). */
export type RedisType = "single" | "cluster" | "sentinel";
export const REDIS_TYPES: readonly RedisType[] = ["single", "cluster", "sentinel"];

export interface RedisAddress {
  host: string;
  port: number;
}

/** TLS to every Redis node (and to the sentinels). Certificates as PEM text. */
export interface RedisTls {
  /** CA certificates that sign the servers' certificates; default: Node's trusted roots. */
  ca?: string | undefined;
  /** A client certificate and its key (mutual TLS). */
  cert?: string | undefined;
  key?: string | undefined;
  /**
   * Verify the server's certificate chain but not that it names the host connected to (as
   * envoyproxy/ratelimit's REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: a Cluster announces its nodes by
   * IP address, which certificates rarely name). @default false
   */
  skipHostnameVerification?: boolean | undefined;
}

/** A resolved Redis connection. */
export interface RedisConnection {
  type: RedisType;
  /** single: the server; cluster: seed nodes (the client learns the rest); sentinel: the sentinels. */
  nodes: RedisAddress[];
  /** single only: a unix socket path instead of `nodes`. */
  path?: string | undefined;
  /** sentinel: the name of the master the sentinels monitor. */
  masterName?: string | undefined;
  /** The database number (single and sentinel; a Cluster has only 0). */
  db?: number | undefined;
  /** Credentials for the Redis servers (AUTH; `username` for an ACL user). */
  username?: string | undefined;
  password?: string | undefined;
  /** Credentials for the sentinels, when they require their own. */
  sentinelUsername?: string | undefined;
  sentinelPassword?: string | undefined;
  tls?: RedisTls | undefined;
}

/** One setting as given: its text and where it came from (a flag or variable name, for errors). */
export interface Given {
  value: string;
  from: string;
}

/** The settings as given, each optional but the URL. */
export interface RedisSettings {
  url: Given;
  type?: Given | undefined;
  sentinelMaster?: Given | undefined;
  auth?: Given | undefined;
  sentinelAuth?: Given | undefined;
  /** A boolean as Go's strconv.ParseBool reads it (envoyproxy/ratelimit's REDIS_TLS). */
  tls?: Given | undefined;
  /** `tcp` or `unix` (envoyproxy/ratelimit's REDIS_SOCKET_TYPE). */
  socketType?: Given | undefined;
  /** Certificate files (paths). */
  tlsCa?: Given | undefined;
  tlsCert?: Given | undefined;
  tlsKey?: Given | undefined;
  tlsSkipHostnameVerification?: Given | undefined;
}

/** A Redis setting that cannot be used; the message names the flag or variable and what to do. */
export class RedisSettingsError extends Error {
  override readonly name = "RedisSettingsError";
}

const TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

/** A boolean as envoyproxy/ratelimit reads its variables (Go's strconv.ParseBool). */
function bool(g: Given | undefined): boolean {
  if (g === undefined) return false;
  if (TRUE.has(g.value)) return true;
  if (FALSE.has(g.value)) return false;
  throw new RedisSettingsError(`${g.from}: must be true or false (got ${JSON.stringify(g.value)})`);
}

/** `user:password` or `password` (envoyproxy/ratelimit's REDIS_AUTH: split at the first colon). */
function credentials(g: Given | undefined): { username?: string; password?: string } {
  if (g === undefined || g.value === "") return {};
  const i = g.value.indexOf(":");
  return i < 0 ? { password: g.value } : { username: g.value.slice(0, i), password: g.value.slice(i + 1) };
}

interface UrlItem {
  tls: boolean;
  address: RedisAddress;
  username?: string | undefined;
  password?: string | undefined;
  db?: number | undefined;
}

const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;

/** One comma-separated item of a URL: `[redis[s]://][user:password@]host[:port][/db]`. */
function urlItem(text: string, url: Given, defaultPort: number): UrlItem {
  const scheme = SCHEME.exec(text)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== "redis" && scheme !== "rediss")
    throw new RedisSettingsError(
      `${url.from}: unknown scheme ${scheme}:// in ${JSON.stringify(text)} (use redis://, or rediss:// for TLS)`,
    );
  let u: URL;
  try {
    u = new URL(scheme === undefined ? `redis://${text}` : text);
  } catch {
    throw new RedisSettingsError(`${url.from}: ${JSON.stringify(text)} is not host:port nor a redis:// URL`);
  }
  if (u.hostname === "") throw new RedisSettingsError(`${url.from}: ${JSON.stringify(text)} names no host`);
  if (u.search !== "" || u.hash !== "")
    throw new RedisSettingsError(
      `${url.from}: ${JSON.stringify(text)}: URL options (?...) are not read; use the --redis-* flags or REDIS_* variables`,
    );
  const port = u.port === "" ? defaultPort : Number(u.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RedisSettingsError(`${url.from}: bad port in ${JSON.stringify(text)}`);
  const path = u.pathname.replace(/^\//, "");
  let db: number | undefined;
  if (path !== "") {
    if (!/^[0-9]+$/.test(path))
      throw new RedisSettingsError(`${url.from}: the path of ${JSON.stringify(text)} must be a database number (got /${path})`);
    db = Number(path);
  }
  // IPv6 literals come back in brackets; the socket wants them bare.
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  return {
    tls: scheme === "rediss",
    address: { host, port },
    username: u.username !== "" ? decodeURIComponent(u.username) : undefined,
    password: u.password !== "" ? decodeURIComponent(u.password) : undefined,
    db,
  };
}

function redisType(g: Given | undefined): RedisType {
  if (g === undefined || g.value === "") return "single";
  const t = g.value.toLowerCase() as RedisType;
  if (!REDIS_TYPES.includes(t))
    throw new RedisSettingsError(`${g.from}: must be ${REDIS_TYPES.join(", ")} (got ${JSON.stringify(g.value)})`);
  return t;
}

/**
 * Resolves the settings into a connection, or throws a {@link RedisSettingsError} naming the
 * setting at fault. `readFile` reads the certificate files (given so that this stays testable).
 *
 * @example
 * parseRedisSettings({ url: { value: "redis://a:7000,b:7001", from: "--redis" }, type: { value: "cluster", from: "--redis-type" } })
 * // { type: "cluster", nodes: [{ host: "a", port: 7000 }, { host: "b", port: 7001 }] }
 */
export function parseRedisSettings(s: RedisSettings, readFile: (path: string) => string = noFiles): RedisConnection {
  const type = redisType(s.type);
  const url = s.url;
  if (url.value.trim() === "") throw new RedisSettingsError(`${url.from}: needs a URL (redis://host:6379)`);
  const items = url.value.split(",").map((x) => x.trim());
  if (items.some((x) => x === ""))
    throw new RedisSettingsError(`${url.from}: an empty item in ${JSON.stringify(url.value)} (hosts are separated by single commas)`);
  const socketType = s.socketType?.value.toLowerCase();
  if (socketType !== undefined && socketType !== "" && socketType !== "tcp" && socketType !== "unix")
    throw new RedisSettingsError(`${s.socketType!.from}: must be tcp or unix (got ${JSON.stringify(s.socketType!.value)})`);

  const conn: RedisConnection = { type, nodes: [] };
  const masterName = sentinelMaster(type, items, s);
  if (masterName !== undefined) conn.masterName = masterName;
  if (items.length === 1 && (items[0] as string).startsWith("/")) {
    // A unix socket: single only.
    if (type !== "single")
      throw new RedisSettingsError(`${url.from}: a unix socket path is for a single Redis (the ${type} type needs host:port items)`);
    if (socketType === "tcp")
      throw new RedisSettingsError(`${url.from} is a unix socket path but ${s.socketType!.from} is tcp: give host:port, or unset it`);
    conn.path = items[0];
  } else {
    if (socketType === "unix")
      throw new RedisSettingsError(
        `${s.socketType!.from} is unix but ${url.from} is not a socket path (/path/to/redis.sock): set it to tcp`,
      );
    hosts(conn, items, s);
  }
  if (conn.password === undefined) Object.assign(conn, credentials(s.auth));
  if (s.sentinelAuth !== undefined && s.sentinelAuth.value !== "") {
    if (type !== "sentinel") throw new RedisSettingsError(`${s.sentinelAuth.from}: only with the sentinel type`);
    const c = credentials(s.sentinelAuth);
    conn.sentinelUsername = c.username;
    conn.sentinelPassword = c.password;
  }
  if (bool(s.tls)) conn.tls ??= {};
  resolveTls(conn, s, readFile);
  return conn;
}

/**
 * The Sentinel master's name: from its flag, or envoyproxy/ratelimit's form "<master
 * name>,<sentinel>,..." (a first item without a port or scheme is the name; taken off `items`).
 */
function sentinelMaster(type: RedisType, items: string[], s: RedisSettings): string | undefined {
  const url = s.url;
  const given = s.sentinelMaster !== undefined && s.sentinelMaster.value !== "" ? s.sentinelMaster : undefined;
  if (type !== "sentinel") {
    if (given) throw new RedisSettingsError(`${given.from}: only with the sentinel type (--redis-type sentinel or REDIS_TYPE=sentinel)`);
    return undefined;
  }
  const first = items[0] as string;
  const bare = !first.includes(":") && !first.includes("/") && items.length > 1;
  if (given && bare && first !== given.value)
    throw new RedisSettingsError(
      `${url.from} names the Sentinel master ${JSON.stringify(first)} and ${given.from} names ${JSON.stringify(given.value)}: give it once`,
    );
  if (bare) items.shift();
  if (given) return given.value;
  if (bare) return first;
  throw new RedisSettingsError(
    `${url.from}: Sentinel needs the master's name: --redis-sentinel-master NAME, or REDIS_URL=NAME,host:26379,... (envoyproxy/ratelimit's form); and at least one sentinel`,
  );
}

/** The host items of a URL: addresses, database, credentials and TLS by scheme, into `conn`. */
function hosts(conn: RedisConnection, items: string[], s: RedisSettings): void {
  const { url } = s;
  const type = conn.type;
  if (type === "single" && items.length > 1)
    throw new RedisSettingsError(
      `${url.from}: several hosts for a single Redis: say which topology they are with --redis-type cluster|sentinel (REDIS_TYPE)`,
    );
  // "redis://a:7000,b:7001": an item without a scheme has the first item's.
  const firstScheme = SCHEME.exec(items[0] as string)?.[0];
  const parsed = items.map((x, i) =>
    urlItem(i > 0 && firstScheme !== undefined && !SCHEME.test(x) ? `${firstScheme}${x}` : x, url, type === "sentinel" ? 26379 : 6379),
  );
  const tlsSchemes = new Set(parsed.map((p) => p.tls));
  if (tlsSchemes.size > 1) throw new RedisSettingsError(`${url.from}: mixes redis:// and rediss:// (TLS is for every node or none)`);
  conn.nodes = parsed.map((p) => p.address);
  if (new Set(parsed.map((p) => p.db)).size > 1) throw new RedisSettingsError(`${url.from}: different database numbers in one URL`);
  const db = parsed[0]?.db;
  if (db !== undefined && type === "cluster")
    throw new RedisSettingsError(`${url.from}: a Redis Cluster has only database 0: remove /${db}`);
  if (db !== undefined) conn.db = db;
  const withAuth = parsed.filter((p) => p.username !== undefined || p.password !== undefined);
  if (withAuth.length > 0) {
    if (type === "sentinel")
      throw new RedisSettingsError(
        `${url.from}: no credentials in a Sentinel URL (they would be ambiguous): the Redis password goes in REDIS_AUTH, the sentinels' in REDIS_SENTINEL_AUTH`,
      );
    const a = withAuth[0] as UrlItem;
    if (withAuth.some((p) => p.username !== a.username || p.password !== a.password))
      throw new RedisSettingsError(`${url.from}: different credentials on different hosts (give them once, on the first)`);
    if (s.auth !== undefined && s.auth.value !== "")
      throw new RedisSettingsError(`${url.from} has credentials and ${s.auth.from} is set too: give them once`);
    conn.username = a.username;
    conn.password = a.password;
  }
  if (tlsSchemes.has(true)) conn.tls = {};
}

/** The certificate files and hostname check, valid only with TLS on. */
function resolveTls(conn: RedisConnection, s: RedisSettings, readFile: (path: string) => string): void {
  const files = [s.tlsCa, s.tlsCert, s.tlsKey].filter((g): g is Given => g !== undefined && g.value !== "");
  const skip = bool(s.tlsSkipHostnameVerification);
  if (conn.tls === undefined) {
    const first = files[0] ?? (skip ? s.tlsSkipHostnameVerification : undefined);
    if (first !== undefined)
      throw new RedisSettingsError(`${first.from} is set but TLS is off: use rediss:// (or REDIS_TLS=true), or unset ${first.from}`);
    return;
  }
  const read = (g: Given | undefined): string | undefined => {
    if (g === undefined || g.value === "") return undefined;
    try {
      return readFile(g.value);
    } catch (e) {
      throw new RedisSettingsError(`${g.from}: cannot read ${g.value}: ${(e as Error).message}`);
    }
  };
  if ((s.tlsCert?.value ?? "") !== "" && (s.tlsKey?.value ?? "") === "")
    throw new RedisSettingsError(`${s.tlsCert!.from} needs its key too (--redis-tls-key, REDIS_TLS_CLIENT_KEY)`);
  if ((s.tlsKey?.value ?? "") !== "" && (s.tlsCert?.value ?? "") === "")
    throw new RedisSettingsError(`${s.tlsKey!.from} needs its certificate too (--redis-tls-cert, REDIS_TLS_CLIENT_CERT)`);
  conn.tls = { ca: read(s.tlsCa), cert: read(s.tlsCert), key: read(s.tlsKey), skipHostnameVerification: skip };
}

function noFiles(path: string): string {
  throw new Error(`no file reader given for ${path}`);
}

/** The connection for logs: the topology, hosts and what is on, never a password. */
export function describeRedis(c: RedisConnection): string {
  const where = c.path ?? c.nodes.map((n) => (n.host.includes(":") ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(",");
  const extras = [
    c.masterName !== undefined ? `master ${c.masterName}` : "",
    c.db !== undefined ? `db ${c.db}` : "",
    c.tls ? `tls${c.tls.skipHostnameVerification ? " (no hostname check)" : ""}` : "",
    c.password !== undefined ? `auth${c.username !== undefined ? ` as ${c.username}` : ""}` : "",
  ].filter(Boolean);
  return `${c.type} ${where}${extras.length ? ` (${extras.join(", ")})` : ""}`;
}
