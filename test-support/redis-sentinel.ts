/**
 * Test helper: a throw-away master, its replica and one sentinel watching them, each a
 * `redis-server` of its own on a free loopback port. Never the Redis on 6379.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort, hasExited, track, until } from "./process.js";
import { answers, HOST, killAndWait, rawCommand, startRedis, type RedisHandle } from "./redis.js";

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
