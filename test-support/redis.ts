/**
 * Shared test helpers: start throw-away single `redis-server` processes on free loopback ports,
 * the raw commands the other helpers use to watch them, and whether Redis tests run, skip
 * loudly, or fail (CI). A cluster is started by redis-cluster.ts, a sentinel by redis-sentinel.ts.
 *
 * Never touch the Redis on 6379 (a developer's own): every server here is started on a free port,
 * and stopped by the test's afterAll (and, as a safety net, when the test process exits).
 */
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { describe } from "vitest";
import { INSTALL, findBinary } from "./outside.js";
import { freePort, hasExited, isPortFree, stopProcess, track, until } from "./process.js";

/** A running (or restartable) single redis-server. */
export interface RedisHandle {
  host: string;
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** Pid of the current process (changes after restart()). */
  pid: number;
  /** Kill the server (SIGKILL after 5 s if SIGTERM did not end it) and wait for its exit. */
  stop(): Promise<void>;
  /** Start it again on the same port (after stop(); for outage tests). Data is not kept. */
  restart(): Promise<void>;
  /** kill -9: the server dies at once, without closing its connections cleanly first. */
  kill9(): Promise<void>;
  /** SIGSTOP: the server freezes (connections stay open, nothing is answered) until resume(). */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
}

export interface StartRedisOptions {
  /** Port to use; default: a free loopback port. */
  port?: number;
  /** Extra `redis-server` arguments, e.g. `["--maxmemory", "10mb"]`. */
  args?: string[];
  /** How long to wait for PING to answer. @default 10000 */
  startTimeoutMs?: number;
}

export const HOST = "127.0.0.1";

/** Encode one RESP command. */
function resp(args: string[]): string {
  let out = `*${args.length}\r\n`;
  for (const a of args) out += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  return out;
}

/**
 * Send one command over a raw socket and return the raw reply text (enough for PING and
 * `CLUSTER INFO`; no client library needed by the helpers).
 */
export async function rawCommand(port: number, args: string[], timeoutMs = 1000): Promise<string> {
  return await new Promise<string>((resolve, reject) => {
    const sock = net.createConnection({ host: HOST, port });
    let buf = "";
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`redis ${HOST}:${port} ${args[0]}: no reply within ${timeoutMs} ms`));
    }, timeoutMs);
    sock.on("connect", () => sock.write(resp(args)));
    sock.on("data", (d) => {
      buf += d.toString("utf8");
      // Simple replies end with one CRLF; bulk replies: "$<len>\r\n<data>\r\n".
      if (buf.startsWith("$")) {
        const nl = buf.indexOf("\r\n");
        const len = Number(buf.slice(1, nl));
        if (len < 0 || buf.length >= nl + 2 + len + 2) done();
      } else if (buf.endsWith("\r\n")) done();
    });
    sock.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    function done(): void {
      clearTimeout(timer);
      sock.end();
      resolve(buf);
    }
  });
}

/** Whether the server on `port` answers `command` with a reply containing `expect` (false while it cannot be reached). */
export async function answers(port: number, command: string[], expect: string): Promise<boolean> {
  return (await rawCommand(port, command).catch(() => "")).includes(expect);
}

/** A port picked for a server was bound by another one first. */
class PortTaken extends Error {}

/** SIGTERM, SIGKILL after 5 s. */
export const killAndWait = (child: ChildProcess) => stopProcess(child, "SIGTERM", 5000);

export function spawnServer(port: number, args: string[], cwd?: string): ChildProcess {
  const child = spawn(
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      HOST,
      "--save",
      "",
      "--appendonly",
      "no",
      "--daemonize",
      "no",
      "--protected-mode",
      "no",
      "--loglevel",
      "warning",
      ...args,
    ],
    { stdio: ["ignore", "ignore", "pipe"], cwd },
  );
  child.stderr?.resume();
  return track(child);
}

/**
 * Start a `redis-server` on a free loopback port (or `opts.port`), without persistence, and
 * wait until it answers PING.
 *
 * @example
 * const redis = await startRedis();
 * afterAll(() => redis.stop());
 * const client = new Redis(redis.port, redis.host);
 */
export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisHandle> {
  let port = opts.port ?? (await freePort());
  const args = opts.args ?? [];
  const startTimeoutMs = opts.startTimeoutMs ?? 10_000;
  let child: ChildProcess | undefined;

  async function start(): Promise<void> {
    const c = spawnServer(port, args);
    child = c;
    await until(
      async () => {
        if (hasExited(c)) throw new Error(`redis-server on port ${port} exited (port in use?)`);
        return answers(port, ["PING"], "+PONG");
      },
      `redis-server on ${HOST}:${port} to answer PING`,
      Math.ceil(startTimeoutMs / 25),
      25,
    );
    // The PONG may have come from another test file's server that bound this port first (ours
    // then exits, failing to bind): make sure the server answering is the one we started.
    const info = await rawCommand(port, ["INFO", "server"]).catch(() => "");
    if (!info.includes(`process_id:${c.pid}\r\n`)) {
      await killAndWait(c);
      throw new PortTaken(`port ${port} is answered by another redis-server than the one started on it`);
    }
    handle.pid = c.pid ?? -1;
  }

  const handle: RedisHandle = {
    host: HOST,
    port,
    url: `redis://${HOST}:${port}`,
    pid: -1,
    async stop() {
      if (child) await killAndWait(child);
      child = undefined;
    },
    async restart() {
      if (child) await killAndWait(child);
      await until(() => isPortFree(port), `port ${port} to be free`, 200, 25);
      await start();
    },
    async kill9() {
      if (child) await stopProcess(child, "SIGKILL", 5000);
      child = undefined;
    },
    pause() {
      child?.kill("SIGSTOP");
    },
    resume() {
      child?.kill("SIGCONT");
    },
  };
  // Another test file's server can bind a port between freePort() and redis-server's bind: on a
  // port we picked, try a new one (an explicit port is the caller's and is not changed).
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      return handle;
    } catch (e) {
      if (opts.port !== undefined || attempt >= 5 || !(e instanceof PortTaken || (child && hasExited(child)))) throw e;
      port = await freePort();
      handle.port = port;
      handle.url = `redis://${HOST}:${port}`;
    }
  }
}

let cachedMode: "run" | "skip" | undefined;

/**
 * "run" when `redis-server` and `redis-cli` (the cluster helper uses it) are on PATH. When one is
 * missing: throws under `CI=true` (tests must run there, never skip), otherwise prints one loud
 * line and returns "skip" (test-support/outside.ts).
 */
export function redisTestMode(): "run" | "skip" {
  if (cachedMode) return cachedMode;
  const server = findBinary("redis-server", "Redis", INSTALL.redis);
  const cli = server === undefined ? undefined : findBinary("redis-cli", "Redis", INSTALL.redis);
  cachedMode = server !== undefined && cli !== undefined ? "run" : "skip";
  return cachedMode;
}

/**
 * `describe` that runs when redis-server is available, skips loudly when not, and fails under CI.
 *
 * @example
 * describeRedis("RedisStore", () => { ... });
 */
export function describeRedis(name: string, fn: () => void): void {
  describe.skipIf(redisTestMode() === "skip")(name, fn);
}
