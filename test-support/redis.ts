/**
 * Shared test helpers: start throw-away `redis-server` processes (single node and a 3-master
 * cluster) on free loopback ports, and decide whether Redis tests run, skip loudly, or fail (CI).
 *
 * Rules (notes/RULES.md): never touch the Redis on 6379; every spawned process is stopped by
 * the test's afterAll (and, as a safety net, when the test process exits).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe } from "vitest";

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
}

export interface StartRedisOptions {
  /** Port to use; default: a free loopback port. */
  port?: number;
  /** Extra `redis-server` arguments, e.g. `["--maxmemory", "10mb"]`. */
  args?: string[];
  /** How long to wait for PING to answer. @default 10000 */
  startTimeoutMs?: number;
}

export interface RedisClusterHandle {
  nodes: { host: string; port: number }[];
  stop(): Promise<void>;
}

const HOST = "127.0.0.1";
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Safety net only: tests stop their servers in afterAll; this covers crashes and aborted runs.
  process.on("exit", () => {
    for (const child of live) {
      try {
        child.kill("SIGKILL");
      } catch {
        /* already gone */
      }
    }
  });
}

/** A free loopback TCP port (the OS picks it; there is a small race until the server binds). */
export async function freePort(): Promise<number> {
  return await new Promise<number>((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, HOST, () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function isPortFree(port: number): Promise<boolean> {
  return await new Promise<boolean>((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, HOST, () => srv.close(() => resolve(true)));
  });
}

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

async function waitFor(what: string, timeoutMs: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      if (await probe()) return;
    } catch (e) {
      lastErr = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${lastErr instanceof Error ? `: ${lastErr.message}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function killAndWait(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    live.delete(child);
    return;
  }
  await new Promise<void>((resolve) => {
    const hard = setTimeout(() => child.kill("SIGKILL"), 5000);
    child.once("exit", () => {
      clearTimeout(hard);
      resolve();
    });
    child.kill("SIGTERM");
  });
  live.delete(child);
}

function spawnServer(port: number, args: string[], cwd?: string): ChildProcess {
  installExitHook();
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
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
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
  const port = opts.port ?? (await freePort());
  const args = opts.args ?? [];
  const startTimeoutMs = opts.startTimeoutMs ?? 10_000;
  let child: ChildProcess | undefined;

  async function start(): Promise<void> {
    const c = spawnServer(port, args);
    child = c;
    let exited = false;
    c.once("exit", () => {
      exited = true;
    });
    await waitFor(`redis-server on ${HOST}:${port} to answer PING`, startTimeoutMs, async () => {
      if (exited) throw new Error(`redis-server on port ${port} exited (port in use?)`);
      return (await rawCommand(port, ["PING"])).startsWith("+PONG");
    });
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
      await waitFor(`port ${port} to be free`, 5000, () => isPortFree(port));
      await start();
    },
  };
  await start();
  return handle;
}

/** A free port whose cluster bus port (port + 10000) is free as well. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = await freePort();
    if (p + 10000 < 65536 && !taken.has(p) && (await isPortFree(p + 10000))) return p;
  }
  throw new Error("no free port pair (port, port+10000) for a cluster node");
}

/**
 * Start a Redis Cluster of `masters` masters (no replicas) in its own temp dir, create it with
 * `redis-cli --cluster create ... --cluster-yes`, and wait until every node reports
 * `cluster_state:ok`.
 *
 * @example
 * const cluster = await startRedisCluster();
 * afterAll(() => cluster.stop());
 * const client = new Cluster(cluster.nodes);
 */
export async function startRedisCluster(masters = 3): Promise<RedisClusterHandle> {
  const dir = mkdtempSync(path.join(tmpdir(), "ratekeeper-cluster-"));
  const ports: number[] = [];
  const taken = new Set<number>();
  for (let i = 0; i < masters; i++) {
    const p = await freeClusterPort(taken);
    taken.add(p);
    ports.push(p);
  }
  const children = ports.map((p) =>
    spawnServer(
      p,
      ["--cluster-enabled", "yes", "--cluster-config-file", `nodes-${p}.conf`, "--cluster-node-timeout", "5000", "--dir", dir],
      dir,
    ),
  );
  const stop = async (): Promise<void> => {
    await Promise.all(children.map((c) => killAndWait(c)));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const p of ports) {
      await waitFor(`cluster node ${p} to answer PING`, 10_000, async () => (await rawCommand(p, ["PING"])).startsWith("+PONG"));
    }
    const create = spawnSync(
      "redis-cli",
      ["--cluster", "create", ...ports.map((p) => `${HOST}:${p}`), "--cluster-replicas", "0", "--cluster-yes"],
      { encoding: "utf8", timeout: 60_000 },
    );
    if (create.status !== 0) {
      throw new Error(`redis-cli --cluster create failed: ${create.stderr || create.stdout}`);
    }
    for (const p of ports) {
      await waitFor(`cluster node ${p} to report cluster_state:ok`, 30_000, async () =>
        (await rawCommand(p, ["CLUSTER", "INFO"])).includes("cluster_state:ok"),
      );
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { nodes: ports.map((port) => ({ host: HOST, port })), stop };
}

let cachedMode: "run" | "skip" | undefined;

/**
 * "run" when `redis-server` is on PATH. When it is missing: throws under `CI=true` (tests must
 * run there, never skip), otherwise prints a loud warning and returns "skip".
 */
export function redisTestMode(): "run" | "skip" {
  if (cachedMode) return cachedMode;
  const probe = spawnSync("redis-server", ["--version"], { encoding: "utf8" });
  if (probe.status === 0 && !probe.error) {
    cachedMode = "run";
    return cachedMode;
  }
  if (process.env.CI === "true") {
    throw new Error("redis-server not found on PATH, and CI=true: Redis tests must run under CI. Install redis-server.");
  }
  const bar = "!".repeat(72);
  console.warn(
    `\n${bar}\n!!! SKIPPING Redis tests: redis-server not found on PATH.\n` +
      `!!! Install redis-server (>= 6.2) to run them; under CI=true they fail instead.\n${bar}\n`,
  );
  cachedMode = "skip";
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
