/**
 * The Redis settings of `ratekeeper serve`: our URLs and flags, envoyproxy/ratelimit's variables
 * (REDIS_TYPE, REDIS_URL, REDIS_AUTH, REDIS_SENTINEL_AUTH, REDIS_TLS*, REDIS_SOCKET_TYPE), the
 * errors that name the setting at fault, and the ioredis options each topology gets. No Redis.
 */
import type { Cluster, Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { UsageError } from "../src/cli/command.js";
import { redisFromCommandLine } from "../src/cli/redis-flags.js";
import { createRedisClient } from "../src/redis-client.js";
import { describeRedis, parseRedisSettings, type RedisSettings } from "../src/redis-connection.js";

const url = (value: string, from = "--redis") => ({ value, from });
const parse = (s: Partial<RedisSettings> & { url: RedisSettings["url"] }, files: Record<string, string> = {}) =>
  parseRedisSettings(s, (f) => {
    if (files[f] === undefined) throw new Error("ENOENT");
    return files[f];
  });

describe("our URL forms", () => {
  it("a single Redis: redis://, with credentials, a database, TLS by rediss://", () => {
    expect(parse({ url: url("redis://10.0.0.5:6380/2") })).toEqual({ type: "single", nodes: [{ host: "10.0.0.5", port: 6380 }], db: 2 });
    expect(parse({ url: url("rediss://app:s%40cret@r.example") })).toEqual({
      type: "single",
      nodes: [{ host: "r.example", port: 6379 }],
      username: "app",
      password: "s@cret",
      tls: { skipHostnameVerification: false },
    });
    expect(parse({ url: url("redis://:pw@[::1]:7000") })).toMatchObject({ nodes: [{ host: "::1", port: 7000 }], password: "pw" });
    expect(parse({ url: url("/run/redis.sock") })).toEqual({ type: "single", nodes: [], path: "/run/redis.sock" });
  });

  it("a Cluster: several hosts after one scheme, or each with its own", () => {
    const type = { value: "cluster", from: "--redis-type" };
    const want = {
      type: "cluster",
      nodes: [
        { host: "a", port: 7000 },
        { host: "b", port: 7001 },
      ],
    };
    expect(parse({ url: url("redis://a:7000,b:7001"), type })).toEqual(want);
    expect(parse({ url: url("redis://a:7000, redis://b:7001"), type })).toEqual(want);
    expect(parse({ url: url("rediss://u:p@a:7000,b:7001"), type })).toMatchObject({ username: "u", password: "p", tls: {} });
  });

  it("Sentinel: the master's name from its flag; sentinels default to port 26379", () => {
    expect(
      parse({
        url: url("redis://s1,s2:26380"),
        type: { value: "sentinel", from: "--redis-type" },
        sentinelMaster: { value: "mymaster", from: "--redis-sentinel-master" },
      }),
    ).toEqual({
      type: "sentinel",
      masterName: "mymaster",
      nodes: [
        { host: "s1", port: 26379 },
        { host: "s2", port: 26380 },
      ],
    });
  });
});

describe("envoyproxy/ratelimit's variables", () => {
  const env = (vars: Record<string, string>) => redisFromCommandLine({}, vars);

  it("REDIS_TYPE (any case), REDIS_URL as host:port lists, the Sentinel master first", () => {
    expect(env({ REDIS_URL: "127.0.0.1:6379" })).toEqual({ type: "single", nodes: [{ host: "127.0.0.1", port: 6379 }] });
    expect(env({ REDIS_TYPE: "CLUSTER", REDIS_URL: "n1:7000,n2:7001,n3:7002" })?.nodes).toHaveLength(3);
    expect(env({ REDIS_TYPE: "sentinel", REDIS_URL: "mymaster,s1:26379,s2:26379" })).toEqual({
      type: "sentinel",
      masterName: "mymaster",
      nodes: [
        { host: "s1", port: 26379 },
        { host: "s2", port: 26379 },
      ],
    });
    expect(env({ REDIS_TLS: "true" })).toBeUndefined(); // without REDIS_URL: the memory store
  });

  it("REDIS_AUTH is password or user:password (split at the first colon); REDIS_SENTINEL_AUTH is the sentinels'", () => {
    expect(env({ REDIS_URL: "r:6379", REDIS_AUTH: "secret" })).toMatchObject({ password: "secret" });
    expect(env({ REDIS_URL: "r:6379", REDIS_AUTH: "app:pa:ss" })).toMatchObject({ username: "app", password: "pa:ss" });
    expect(env({ REDIS_TYPE: "sentinel", REDIS_URL: "m,s:26379", REDIS_AUTH: "x", REDIS_SENTINEL_AUTH: "sent" })).toMatchObject({
      password: "x",
      sentinelPassword: "sent",
    });
  });

  it("REDIS_TLS as Go reads a boolean, with the certificate files and REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", () => {
    expect(env({ REDIS_URL: "r:6379", REDIS_TLS: "1" })?.tls).toEqual({ skipHostnameVerification: false });
    expect(env({ REDIS_URL: "r:6379", REDIS_TLS: "False" })?.tls).toBeUndefined();
    const files = { "/ca.pem": "CA", "/c.pem": "CERT", "/k.pem": "KEY" };
    const c = parse(
      {
        url: url("r:6379", "REDIS_URL"),
        tls: { value: "true", from: "REDIS_TLS" },
        tlsCa: { value: "/ca.pem", from: "REDIS_TLS_CACERT" },
        tlsCert: { value: "/c.pem", from: "REDIS_TLS_CLIENT_CERT" },
        tlsKey: { value: "/k.pem", from: "REDIS_TLS_CLIENT_KEY" },
        tlsSkipHostnameVerification: { value: "true", from: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION" },
      },
      files,
    );
    expect(c.tls).toEqual({ ca: "CA", cert: "CERT", key: "KEY", skipHostnameVerification: true });
  });

  it("a flag wins over its variable", () => {
    expect(redisFromCommandLine({ redis: "redis://flag:1" }, { REDIS_URL: "env:2" })?.nodes).toEqual([{ host: "flag", port: 1 }]);
    expect(redisFromCommandLine({ "redis-type": "single" }, { REDIS_TYPE: "cluster", REDIS_URL: "a:1" })?.type).toBe("single");
  });
});

describe("bad input names the flag or variable and what to do", () => {
  const fails = (v: Record<string, string | boolean>, env: Record<string, string>, message: RegExp) => {
    expect(() => redisFromCommandLine(v, env)).toThrow(UsageError);
    expect(() => redisFromCommandLine(v, env)).toThrow(message);
  };
  it.each([
    [{ "redis-type": "cluster" }, {}, /^--redis-type: needs --redis URL \(or REDIS_URL\)$/],
    [
      { redis: "redis://a:1,b:2" },
      {},
      /^--redis: several hosts for a single Redis: say which topology they are with --redis-type cluster\|sentinel/,
    ],
    [{}, { REDIS_URL: "a:1,b:2" }, /^REDIS_URL: several hosts/],
    [{}, { REDIS_TYPE: "ring", REDIS_URL: "a:1" }, /^REDIS_TYPE: must be single, cluster, sentinel \(got "ring"\)/],
    [
      { "redis-type": "sentinel", redis: "redis://s:26379" },
      {},
      /^--redis: Sentinel needs the master's name: --redis-sentinel-master NAME/,
    ],
    [
      { "redis-type": "sentinel", redis: "m,s:1", "redis-sentinel-master": "n" },
      {},
      /names the Sentinel master "m" and --redis-sentinel-master names "n"/,
    ],
    [{ redis: "redis://a:1", "redis-sentinel-master": "m" }, {}, /^--redis-sentinel-master: only with the sentinel type/],
    [{ "redis-type": "cluster", redis: "redis://a:1/3" }, {}, /^--redis: a Redis Cluster has only database 0/],
    [{ redis: "http://a:1" }, {}, /^--redis: unknown scheme http:\/\//],
    [{ redis: "redis://a:99999" }, {}, /^--redis: "redis:\/\/a:99999" is not host:port nor a redis:\/\/ URL/],
    [{ redis: "redis://a:1?db=2" }, {}, /URL options \(\?\.\.\.\) are not read/],
    [{ redis: "redis://a:1,,b:2" }, {}, /an empty item/],
    [{ "redis-type": "cluster", redis: "redis://a:1,rediss://b:2" }, {}, /mixes redis:\/\/ and rediss:\/\//],
    [{ "redis-type": "sentinel", redis: "redis://u:p@s:1", "redis-sentinel-master": "m" }, {}, /no credentials in a Sentinel URL/],
    [{ redis: "redis://u:p@a:1" }, { REDIS_AUTH: "q" }, /^--redis has credentials and REDIS_AUTH is set too/],
    [{}, { REDIS_URL: "a:1", REDIS_TLS: "yes" }, /^REDIS_TLS: must be true or false \(got "yes"\)/],
    [{}, { REDIS_URL: "a:1", REDIS_TLS_CACERT: "/x" }, /^REDIS_TLS_CACERT is set but TLS is off: use rediss:\/\/ \(or REDIS_TLS=true\)/],
    [{ redis: "rediss://a:1", "redis-tls-ca": "/nonexistent/ca.pem" }, {}, /^--redis-tls-ca: cannot read \/nonexistent\/ca\.pem/],
    [{ redis: "rediss://a:1", "redis-tls-cert": "/c" }, {}, /^--redis-tls-cert needs its key too/],
    [{}, { REDIS_URL: "a:1", REDIS_SENTINEL_AUTH: "x" }, /^REDIS_SENTINEL_AUTH: only with the sentinel type/],
    [{}, { REDIS_URL: "a:1", REDIS_SOCKET_TYPE: "unix" }, /^REDIS_SOCKET_TYPE is unix but REDIS_URL is not a socket path/],
    [{}, { REDIS_URL: "/run/r.sock", REDIS_TYPE: "cluster" }, /^REDIS_URL: a unix socket path is for a single Redis/],
  ] as const)("%j %j", (v, env, message) => fails(v, env, message));
});

describe("what reaches ioredis", () => {
  const close = (c: Redis | Cluster) => c.disconnect();
  const tls = { ca: "CA", skipHostnameVerification: true };

  it("single: host, credentials, TLS with the chain checked and the host name not", () => {
    const c = createRedisClient({ type: "single", nodes: [{ host: "127.0.0.1", port: 1 }], username: "u", password: "p", tls }) as Redis;
    try {
      expect(c.options).toMatchObject({ host: "127.0.0.1", port: 1, username: "u", password: "p", enableOfflineQueue: false });
      expect(c.options.autoResendUnfulfilledCommands).toBe(false);
      expect(c.options.tls?.ca).toBe("CA");
      expect(c.options.tls?.rejectUnauthorized).toBeUndefined(); // Node's default: verify the chain
      expect(c.options.tls?.checkServerIdentity?.("other.example", {} as never)).toBeUndefined();
    } finally {
      close(c);
    }
  });

  it("cluster: the seeds, and credentials and TLS for every node", () => {
    const c = createRedisClient({ type: "cluster", nodes: [{ host: "127.0.0.1", port: 1 }], password: "p", tls }) as Cluster;
    try {
      expect(c.isCluster).toBe(true);
      expect(c.options.redisOptions).toMatchObject({ password: "p", tls: { ca: "CA" } });
      expect(c.options.enableOfflineQueue).toBe(false);
    } finally {
      close(c);
    }
  });

  it("sentinel: the master's name, the sentinels, their own credentials, TLS to them too", () => {
    const c = createRedisClient({
      type: "sentinel",
      nodes: [{ host: "127.0.0.1", port: 1 }],
      masterName: "m",
      password: "p",
      sentinelPassword: "sp",
      tls,
    }) as Redis;
    try {
      expect(c.options).toMatchObject({ name: "m", sentinels: [{ host: "127.0.0.1", port: 1 }], password: "p", sentinelPassword: "sp" });
      expect(c.options.enableTLSForSentinelMode).toBe(true);
      expect(c.options.sentinelTLS?.ca).toBe("CA");
    } finally {
      close(c);
    }
  });

  it("logs say the topology and what is on, never a password", () => {
    const d = describeRedis(parse({ url: url("rediss://app:secret@a:7000,b:7001"), type: { value: "cluster", from: "t" } }));
    expect(d).toBe("cluster a:7000,b:7001 (tls, auth as app)");
    expect(d).not.toContain("secret");
  });
});
