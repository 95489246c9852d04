/**
 * Test helper: a throw-away Redis Cluster (masters, optional replicas, each a `redis-server` of its
 * own on a free loopback port pair), and `CLUSTER NODES` as data. Never the Redis on 6379.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort, hasExited, isPortFree, stopProcess, until } from "./process.js";
import { answers, HOST, killAndWait, rawCommand, spawnServer } from "./redis.js";

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
