/**
 * A throw-away PostgreSQL server of the test's own, for outage tests that must stop, kill and
 * restart the real server (the machine's PostgreSQL on 5432 is shared: it is never signalled).
 *
 * `initdb` makes a cluster in a temp folder (trust auth, fsync off) and `postgres` serves it on a
 * free loopback port, its socket in that folder. PostgreSQL refuses to run as root: under root
 * both run as the `postgres` user (Debian's package creates it), the folder handed to that user.
 * The binaries are looked for on PATH and in Debian's /usr/lib/postgresql/<version>/bin. Without
 * them (or, under root, without a `postgres` user) the caller skips with one loud line, or fails
 * under CI=true.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { skipOrFail, whichOnPath } from "./outside.js";
import { captureLines, freePort, hasExited, stopProcess, track, until } from "./process.js";

const INSTALL_SERVER =
  "PostgreSQL's server binaries initdb and postgres (Debian: apt-get install postgresql; they live in /usr/lib/postgresql/<version>/bin)";

/** A private PostgreSQL server; its data survive kill9() and restart(). */
export interface PostgresHandle {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  url: string;
  /** Pid of the current postmaster (changes after restart()). */
  readonly pid: number;
  /** kill -9 of the postmaster; waits until nothing of it answers any more. */
  kill9(): Promise<void>;
  /** SIGSTOP of the postmaster and every backend: connections stay open, nothing is answered. */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
  /** Starts the server again on the same folder and port (after kill9()), crash recovery included. */
  restart(): Promise<void>;
  /** Stops the server and removes its folder. */
  stop(): Promise<void>;
}

/** The folder holding initdb and postgres, or undefined (after one loud skip line, or a throw under CI=true). */
export function postgresBinDir(): string | undefined {
  const onPath = whichOnPath("initdb");
  if (onPath !== undefined && existsSync(path.join(path.dirname(onPath), "postgres"))) return path.dirname(onPath);
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const dir = path.join(root, v, "bin");
    if (existsSync(path.join(dir, "initdb")) && existsSync(path.join(dir, "postgres"))) return dir;
  }
  skipOrFail("PostgreSQL (a private server)", "initdb and postgres not found on PATH or in /usr/lib/postgresql/*/bin", INSTALL_SERVER);
  return undefined;
}

/** The uid and gid to run PostgreSQL as: ours, or the `postgres` user's under root. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    return { uid, gid };
  } catch {
    throw new Error(`PostgreSQL refuses to run as root, and there is no 'postgres' user to run it as: ${INSTALL_SERVER}`);
  }
}

/** Starts a private PostgreSQL (see the file's comment). `bin` from postgresBinDir(). */
export async function startPostgres(bin: string): Promise<PostgresHandle> {
  const as = runAs();
  const dir = mkdtempSync(path.join(tmpdir(), "rk-pg-"));
  if (as) chownSync(dir, as.uid, as.gid);
  const data = path.join(dir, "data");
  execFileSync(path.join(bin, "initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"], {
    ...as,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const port = await freePort();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let proc: ChildProcess;
  let lines: string[] = [];

  const launch = async (): Promise<void> => {
    proc = track(
      spawn(
        path.join(bin, "postgres"),
        ["-D", data, "-p", String(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off"],
        { ...as, stdio: ["ignore", "pipe", "pipe"] },
      ),
    );
    lines = captureLines(proc);
    await until(
      async () => {
        if (hasExited(proc)) throw new Error(`postgres exited before it answered:\n${lines.join("\n")}`);
        return await answers(url);
      },
      `the private PostgreSQL on ${port} to answer`,
      300,
      100,
    );
  };
  /** The postmaster's children (backends and helpers), to pause and resume with it. */
  const children = (): number[] => {
    try {
      return execFileSync("pgrep", ["-P", String(proc.pid)], { encoding: "utf8" })
        .split("\n")
        .filter(Boolean)
        .map(Number);
    } catch {
      return []; // pgrep exits 1 when there are none
    }
  };
  const signalAll = (signal: NodeJS.Signals): void => {
    for (const pid of [proc.pid as number, ...children()]) {
      try {
        process.kill(pid, signal);
      } catch {
        // gone meanwhile
      }
    }
  };

  await launch();
  return {
    port,
    url,
    get pid() {
      return proc.pid as number;
    },
    async kill9() {
      const kids = children();
      await stopProcess(proc, "SIGKILL");
      // Backends notice their postmaster's death and exit by themselves; a restart waits for them
      // (the old shared memory must be released). SIGKILL those that linger.
      for (const pid of kids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    },
    pause: () => signalAll("SIGSTOP"),
    resume: () => signalAll("SIGCONT"),
    async restart() {
      await launch();
    },
    async stop() {
      if (!hasExited(proc)) {
        signalAll("SIGCONT");
        await stopProcess(proc, "SIGINT"); // fast shutdown
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Whether the server at `url` answers a query now. */
async function answers(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  c.on("error", () => undefined);
  try {
    await c.connect();
    await c.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}
