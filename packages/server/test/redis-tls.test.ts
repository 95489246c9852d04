/**
 * The service on a Redis that takes only mutual TLS (a client certificate from its CA) and an ACL
 * user's password: our URL and flags (rediss://user:password@host, --redis-tls-ca, --redis-tls-cert,
 * --redis-tls-key) and envoyproxy/ratelimit's variables (REDIS_TLS, REDIS_TLS_CACERT,
 * REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY, REDIS_AUTH=user:password,
 * REDIS_TLS_SKIP_HOSTNAME_VERIFICATION) reach a real redis-server; a certificate that does not
 * name the host, one from another CA, a wrong password and no client certificate each leave the
 * service not ready, answering by the failure policy. Certificates made with openssl for the test.
 * Also the unix socket, envoyproxy/ratelimit's default form (REDIS_SOCKET_TYPE=unix, REDIS_URL=<path>).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { INSTALL, findBinary, skipOrFail } from "../../../test-support/outside.js";
import { freePort, until } from "../../../test-support/process.js";
import { describeRedis, rawCommand, redisTestMode, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { postJson, startServiceProcess, type ServiceProc } from "./support.js";

const RULES = `
domains:
  - domain: t
    descriptors:
      - key: user
        algorithm: fixed-window
        limit: 5
        window: 1h
`;

const openssl = findBinary("openssl", "Redis TLS", "openssl (Debian: apt-get install openssl)");

/**
 * Whether this redis-server was built with TLS: a TLS build refuses the missing certificate file
 * ("Failed to configure TLS") before it binds anything, and exits.
 */
function redisHasTls(): boolean {
  const r = spawnSync("redis-server", ["--port", "0", "--tls-port", "1", "--tls-cert-file", "/nonexistent"], {
    encoding: "utf8",
    timeout: 5000,
  });
  if (/configure TLS|tls-key-file|certificate/i.test(`${r.stdout}${r.stderr}`)) return true;
  skipOrFail("Redis TLS", "redis-server was built without TLS (BUILD_TLS=yes)", INSTALL.redis);
  return false;
}

/** Runs openssl in `dir`; throws with its output when it fails. */
function ssl(dir: string, args: string[]): void {
  const r = spawnSync(openssl!, args, { cwd: dir, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.stderr}`);
}

/** A CA (`<name>.pem`, `<name>.key`). */
function ca(dir: string, name: string): void {
  ssl(dir, [
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.pem`,
    "-days",
    "1",
    "-subj",
    `/CN=${name}`,
  ]);
}

/** A key and a certificate (`<name>.key`, `<name>.pem`) signed by the CA `ca`, with the extensions in `ext`. */
function signed(dir: string, name: string, subject: string, ext: string): void {
  ssl(dir, ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject]);
  writeFileSync(path.join(dir, `${name}.ext`), ext);
  ssl(
    dir,
    ["x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", `${name}.pem`].concat([
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
    ]),
  );
}

describeRedis("the service on Redis with TLS and an ACL user", () => {
  // redisHasTls() runs redis-server: only when it is there (this body is collected even when skipped).
  const run = redisTestMode() === "run" && openssl !== undefined && redisHasTls();
  let dir: string;
  let redis: RedisHandle;
  let tlsPort: number;
  const svc: Record<"flags" | "envoy" | "wrongName" | "otherCa" | "wrongPassword" | "noClientCert" | "socket", ServiceProc> = {} as never;

  beforeAll(async () => {
    if (!run) return;
    dir = mkdtempSync(path.join(tmpdir(), "rk-tls-"));
    ca(dir, "ca");
    ca(dir, "other");
    // The server's certificate names "localhost" only (not 127.0.0.1); the client's, for mutual TLS.
    signed(dir, "server", "/CN=localhost", "subjectAltName=DNS:localhost\n");
    signed(dir, "client", "/CN=ratekeeper", "extendedKeyUsage=clientAuth\n");
    // The plain port stays open (without a password) for the helpers and for looking at the keys.
    writeFileSync(path.join(dir, "users.acl"), "user default on nopass ~* &* +@all\nuser app on >s3cret ~* &* +@all\n");
    writeFileSync(path.join(dir, "rules.yaml"), RULES);
    tlsPort = await freePort();
    const f = (name: string) => path.join(dir, name);
    redis = await startRedis({
      args: [
        "--tls-port",
        String(tlsPort),
        "--tls-cert-file",
        f("server.pem"),
        "--tls-key-file",
        f("server.key"),
        "--tls-ca-cert-file",
        f("ca.pem"),
        "--tls-auth-clients",
        "yes",
        "--aclfile",
        f("users.acl"),
        "--unixsocket",
        f("redis.sock"),
        "--unixsocketperm",
        "700",
      ],
    });
    const args = ["--config", f("rules.yaml"), "--no-watch"];
    const envoy = {
      REDIS_URL: `127.0.0.1:${tlsPort}`,
      REDIS_TLS: "true",
      REDIS_TLS_CACERT: f("ca.pem"),
      REDIS_TLS_CLIENT_CERT: f("client.pem"),
      REDIS_TLS_CLIENT_KEY: f("client.key"),
      REDIS_AUTH: "app:s3cret",
    };
    const skip = { REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: "true" };
    const ours = (url: string) =>
      [...args, "--redis", url, "--redis-tls-ca", f("ca.pem"), "--redis-tls-cert", f("client.pem")].concat([
        "--redis-tls-key",
        f("client.key"),
      ]);
    const { REDIS_TLS_CLIENT_CERT: _cert, REDIS_TLS_CLIENT_KEY: _key, ...noClientCert } = envoy;
    [svc.flags, svc.envoy, svc.wrongName, svc.otherCa, svc.wrongPassword, svc.noClientCert, svc.socket] = await Promise.all([
      startServiceProcess(ours(`rediss://app:s3cret@localhost:${tlsPort}`)),
      startServiceProcess(args, { ...envoy, ...skip }),
      startServiceProcess(args, envoy),
      startServiceProcess(args, { ...envoy, ...skip, REDIS_TLS_CACERT: f("other.pem") }),
      startServiceProcess(ours(`rediss://app:wrong@localhost:${tlsPort}`)),
      startServiceProcess(args, { ...noClientCert, ...skip }),
      startServiceProcess(args, { REDIS_SOCKET_TYPE: "unix", REDIS_URL: f("redis.sock"), REDIS_AUTH: "app:s3cret" }),
    ]);
  });

  afterAll(async () => {
    await Promise.all(Object.values(svc).map((s) => s.stop()));
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const check = (s: ServiceProc, user: string) => postJson(`${s.base}/v1/check`, { domain: "t", descriptors: [{ user }] });

  it.skipIf(!run)(
    "rediss:// with --redis-tls-ca, REDIS_TLS with REDIS_AUTH=user:password, a unix socket: all decide in that Redis",
    async () => {
      for (const s of [svc.flags, svc.envoy]) expect((await fetch(`${s.base}/readyz`)).status).toBe(200);
      expect(svc.flags.lines.join("\n")).toContain(`"redis":"single localhost:${tlsPort} (tls, auth as app)"`);
      expect(svc.flags.lines.join("\n")).not.toContain("s3cret");
      const a = await check(svc.flags, "u");
      const b = await check(svc.envoy, "u");
      expect([a.json.statuses[0].remaining, a.json.statuses[0].reason]).toEqual([4, null]);
      expect([b.json.statuses[0].remaining, b.json.statuses[0].reason]).toEqual([3, null]);
      expect(await rawCommand(redis.port, ["KEYS", "rk:{*user=u}*"])).toMatch(/user=u/);
      // The same Redis over its unix socket.
      const c = await check(svc.socket, "u");
      expect([c.json.statuses[0].remaining, c.json.statuses[0].reason]).toEqual([2, null]);
    },
  );

  it.skipIf(!run)(
    "a certificate not naming the host, another CA, a wrong password, no client certificate: not ready, the policy answers",
    async () => {
      for (const s of [svc.wrongName, svc.otherCa, svc.wrongPassword, svc.noClientCert]) {
        await until(async () => (await fetch(`${s.base}/readyz`)).status === 503, "not ready", 100, 50);
        const r = await check(s, "v");
        expect([r.status, r.json.statuses[0].reason]).toEqual([200, "degraded"]);
      }
    },
  );
});
