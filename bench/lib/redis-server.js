// A throw-away redis-server on a free loopback port for the benchmarks (never the one on 6379),
// with an ioredis admin connection (INFO, MEMORY USAGE). Stopped by the section at its end.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";

export async function freePort() {
  return await new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

/**
 * Starts redis-server; resolves { port, pid, admin, stop() }.
 * @param {{ cpu?: number }} [opts] pin the server to this CPU (`taskset -c`), e.g. to keep it off the client's core
 */
export async function startRedis(opts = {}) {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), "rk-bench-"));
  const server = [
    "redis-server",
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    dir,
    "--loglevel",
    "warning",
  ];
  const argv = opts.cpu === undefined ? server : ["taskset", "-c", String(opts.cpu), ...server];
  const child = spawn(argv[0], argv.slice(1), {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const client = new Redis(port, "127.0.0.1", { lazyConnect: true, retryStrategy: () => 50 });
  client.on("error", () => {}); // refused until redis-server listens: retried below
  for (let i = 0; ; i++) {
    try {
      // After a refused first attempt ioredis keeps reconnecting by itself (retryStrategy), and
      // connect() would throw "already connecting": only (re)start it when it has stopped.
      if (client.status === "wait" || client.status === "end") await client.connect();
      await client.ping();
      break;
    } catch (e) {
      if (i > 200) throw e;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  return {
    port,
    pid: child.pid,
    admin: client,
    async stop() {
      client.disconnect();
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
