/**
 * Shared test helpers: start throw-away `redis-server` processes (single node and a 3-master
 * cluster) on free loopback ports, and decide whether Redis tests run, skip loudly, or fail (CI).
 *
 * Never touch the Redis on 6379 (a developer's own): every server here is started on a free port,
 * and stopped by the test's afterAll (and, as a safety net, when the test process exits).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
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

export interface RedisClusterHandle {
  /** Every node, masters first (as created), then replicas. */
  nodes: { host: string; port: number }[];
  /** kill -9 one node (by port): its replica, if any, is promoted after the cluster node timeout. */
  kill9(port: number): Promise<void>;
  /** SIGSTOP one node: silent with its connections open (a replica is promoted as for a dead one) until resume(). */
  pause(port: number): void;
  /** SIGCONT after pause(). */
  resume(port: number): void;
  stop(): Promise<void>;
}

export interface StartRedisClusterOptions {
  /** Masters. @default 3 */
  masters?: number;
  /** Replicas per master (each node a process of its own). @default 0 */
  replicas?: number;
  /**
   * `cluster-node-timeout`: how long a node may be unreachable before it counts as failed and a
   * replica of a failed master starts its election. @default 5000
   */
  nodeTimeoutMs?: number;
  /** Extra `redis-server` arguments for every node, e.g. `["--aclfile", file]`. */
  args?: string[];
}

const HOST = "127.0.0.1";

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
async function answers(port: number, command: string[], expect: string): Promise<boolean> {
  return (await rawCommand(port, command).catch(() => "")).includes(expect);
}

/** A port picked for a server was bound by another one first. */
class PortTaken extends Error {}

/** SIGTERM, SIGKILL after 5 s. */
const killAndWait = (child: ChildProcess) => stopProcess(child, "SIGTERM", 5000);

function spawnServer(port: number, args: string[], cwd?: string): ChildProcess {
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

/** A free port whose cluster bus port (port + 10000) is free as well. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = await freePort();
    if (p + 10000 < 65536 && !taken.has(p) && (await isPortFree(p + 10000))) return p;
  }
  throw new Error("no free port pair (port, port+10000) for a cluster node");
}

/**
 * Start a Redis Cluster of `masters` masters (and `replicas` replicas of each) in its own temp
 * dir, create it with `redis-cli --cluster create ... --cluster-yes`, and wait until every node
 * reports `cluster_state:ok` (and, with replicas, until every master has its replicas).
 *
 * @example
 * const cluster = await startRedisCluster();
 * afterAll(() => cluster.stop());
 * const client = new Cluster(cluster.nodes);
 */
export async function startRedisCluster(opts: number | StartRedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const o = typeof opts === "number" ? { masters: opts } : opts;
  const masters = o.masters ?? 3;
  const replicas = o.replicas ?? 0;
  const dir = mkdtempSync(path.join(tmpdir(), "ratekeeper-cluster-"));
  const ports: number[] = [];
  const taken = new Set<number>();
  for (let i = 0; i < masters * (1 + replicas); i++) {
    const p = await freeClusterPort(taken);
    taken.add(p);
    ports.push(p);
  }
  const children = new Map(
    ports.map((p) => [
      p,
      spawnServer(
        p,
        [
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          `nodes-${p}.conf`,
          "--cluster-node-timeout",
          String(o.nodeTimeoutMs ?? 5000),
          "--dir",
          dir,
          ...(o.args ?? []),
        ],
        dir,
      ),
    ]),
  );
  const stop = async (): Promise<void> => {
    for (const c of children.values()) if (!hasExited(c)) c.kill("SIGCONT"); // a paused node would wait for SIGKILL
    await Promise.all([...children.values()].map((c) => killAndWait(c)));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const p of ports) {
      await until(() => answers(p, ["PING"], "+PONG"), `cluster node ${p} to answer PING`, 400, 25);
    }
    // redis-cli makes the first `masters` nodes masters and the rest their replicas.
    const create = spawnSync(
      "redis-cli",
      ["--cluster", "create", ...ports.map((p) => `${HOST}:${p}`), "--cluster-replicas", String(replicas), "--cluster-yes"],
      { encoding: "utf8", timeout: 60_000 },
    );
    if (create.status !== 0) {
      throw new Error(`redis-cli --cluster create failed: ${create.stderr || create.stdout}`);
    }
    for (const p of ports) {
      await until(() => answers(p, ["CLUSTER", "INFO"], "cluster_state:ok"), `cluster node ${p} to report cluster_state:ok`, 1200, 25);
    }
    if (replicas > 0) {
      // Every replica has its master's link up (a failover needs a replica that has synced).
      for (const p of ports.slice(masters)) {
        await until(() => answers(p, ["INFO", "replication"], "master_link_status:up"), `replica ${p} to sync`, 1200, 25);
      }
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    nodes: ports.map((port) => ({ host: HOST, port })),
    async kill9(port) {
      const c = children.get(port);
      if (c) await stopProcess(c, "SIGKILL", 5000);
    },
    pause: (port) => children.get(port)?.kill("SIGSTOP"),
    resume: (port) => children.get(port)?.kill("SIGCONT"),
    stop,
  };
}

/** One line of `CLUSTER NODES`: a node's port, id, role, and the slot ranges it serves. */
export interface ClusterNodeInfo {
  id: string;
  port: number;
  role: "master" | "replica";
  /** The node id of its master (replicas). */
  masterId?: string;
  failed: boolean;
  /** Slot ranges, as [first, last]. */
  slots: [number, number][];
}

/** `CLUSTER NODES` as seen by the node on `port`. */
export async function clusterNodes(port: number): Promise<ClusterNodeInfo[]> {
  const raw = await rawCommand(port, ["CLUSTER", "NODES"]);
  const body = raw.slice(raw.indexOf("\r\n") + 2);
  return body
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .map((line) => {
      const [id, addr, flags, master, , , , , ...slots] = line.split(" ");
      const f = (flags ?? "").split(",");
      return {
        id: id ?? "",
        port: Number(/:(\d+)@/.exec(addr ?? "")?.[1]),
        role: f.includes("master") ? "master" : "replica",
        ...(master && master !== "-" ? { masterId: master } : {}),
        failed: f.includes("fail"),
        slots: slots
          .filter((x) => !x.startsWith("["))
          .map((x) => {
            const [a, b] = x.split("-").map(Number);
            return [a as number, b ?? (a as number)] as [number, number];
          }),
      };
    });
}

/** A master, its replica and one sentinel watching them (each a process of its own). */
export interface RedisSentinelHandle {
  /** The name the sentinel knows the master by. */
  masterName: string;
  /** The sentinel's address. */
  sentinel: { host: string; port: number };
  /** The master and the replica as started (the replica becomes master after a failover). */
  master: RedisHandle;
  replica: RedisHandle;
  /** The port of the server the sentinel currently names master. */
  currentMasterPort(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Start a master, one replica of it, and one sentinel (`redis-server FILE --sentinel`) with quorum
 * 1, `down-after-milliseconds` `downAfterMs` and a short failover timeout, and wait until the
 * sentinel knows the replica (so that killing the master promotes it).
 *
 * @example
 * const s = await startRedisSentinel();
 * afterAll(() => s.stop());
 * const client = new Redis({ sentinels: [s.sentinel], name: s.masterName });
 */
export async function startRedisSentinel(opts: { downAfterMs?: number } = {}): Promise<RedisSentinelHandle> {
  const masterName = "rkmaster";
  // Every file (a replication's RDB, the sentinel's rewritten config) goes in a temp dir.
  const dir = mkdtempSync(path.join(tmpdir(), "ratekeeper-sentinel-"));
  const master = await startRedis({ args: ["--dir", dir, "--dbfilename", "master.rdb"] });
  const replica = await startRedis({ args: ["--dir", dir, "--dbfilename", "replica.rdb", "--replicaof", HOST, String(master.port)] });
  let child: ChildProcess | undefined;
  const stop = async (): Promise<void> => {
    if (child) await killAndWait(child);
    await Promise.all([master.stop(), replica.stop()]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await until(() => answers(replica.port, ["INFO", "replication"], "master_link_status:up"), "the replica to sync", 1200, 25);
    const port = await freePort();
    const conf = path.join(dir, "sentinel.conf");
    writeFileSync(
      conf,
      [
        `port ${port}`,
        `bind ${HOST}`,
        `dir ${dir}`,
        `sentinel monitor ${masterName} ${HOST} ${master.port} 1`,
        `sentinel down-after-milliseconds ${masterName} ${opts.downAfterMs ?? 1000}`,
        `sentinel failover-timeout ${masterName} 3000`,
        `sentinel parallel-syncs ${masterName} 1`,
        "",
      ].join("\n"),
    );
    child = track(spawn("redis-server", [conf, "--sentinel", "--loglevel", "warning"], { stdio: ["ignore", "ignore", "pipe"], cwd: dir }));
    child.stderr?.resume();
    const c = child;
    await until(
      async () => {
        if (hasExited(c)) throw new Error(`redis sentinel on port ${port} exited`);
        return answers(port, ["SENTINEL", "REPLICAS", masterName], String(replica.port));
      },
      "the sentinel to know the replica",
      1200,
      25,
    );
    return {
      masterName,
      sentinel: { host: HOST, port },
      master,
      replica,
      async currentMasterPort() {
        const r = await rawCommand(port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName]);
        return Number(/\$\d+\r\n(\d+)\r\n$/.exec(r)?.[1]);
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
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
