/**
 * The service's stdout a pipe that another process writes to as well (a wrapper script or a
 * sidecar that inherited it, `(ratekeeper serve & other) | shipper`): the service writes its log
 * through libuv, which puts its descriptor in non-blocking mode (O_NONBLOCK). On fd 1 itself that
 * flag is one of the open pipe, shared with every process holding it: the others' blocking
 * writes then met EAGAIN while the service ran (a C program's fwrite failed, a Python print raised
 * BlockingIOError), which ratekeeper before 847c246 never did to them. The service now writes
 * through a descriptor of the pipe of its own (Linux: /proc/self/fd/1 opened again), and fd 1,
 * the one it shares, stays as it was given. Checked on the flags of the shared description
 * (/proc/<pid>/fdinfo): a named pipe whose write end the test holds too, and node's own pipe.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, constants, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { stopProcess, track, until } from "../../../../test-support/process.js";
import { CLI, ROOT } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-log-shared-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether the open file description of `fdinfo` (a /proc/.../fdinfo/N file) is non-blocking. */
function nonBlocking(fdinfo: string): boolean {
  const flags = /flags:\s+([0-7]+)/.exec(readFileSync(fdinfo, "utf8"))?.[1];
  expect(flags).toBeDefined();
  return (parseInt(flags as string, 8) & constants.O_NONBLOCK) !== 0;
}

/** The whole lines read from `out`, as they come. */
function linesOf(out: Readable): string[] {
  const lines: string[] = [];
  let buf = "";
  out.on("data", (c: Buffer) => {
    buf += c.toString("utf8");
    const parts = buf.split("\n");
    buf = parts.pop() ?? "";
    lines.push(...parts);
  });
  return lines;
}

/** The pid of the child of `parent` whose command line has `word` (read from /proc: no pgrep needed). */
function childOf(parent: number, word: string): string {
  for (const p of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const ppid = readFileSync(`/proc/${p}/stat`, "utf8")
        .replace(/^.*\) /s, "")
        .split(" ")[1];
      if (ppid === String(parent) && readFileSync(`/proc/${p}/cmdline`, "utf8").includes(word)) return p;
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no child of ${parent} running ${word}`);
}

/** Starts `ratekeeper serve` with stdout `stdout`, its lines read from `out` (or its own pipe). */
async function start(stdout: "pipe" | number, reader?: Readable): Promise<{ proc: ChildProcess; lines: string[] }> {
  const proc = track(
    spawn(
      process.execPath,
      [CLI, "serve", "--port", "0", "--grpc-port", "0", "--host", "127.0.0.1", "--config", path.join(ROOT, "examples/rules.yaml")],
      { env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", stdout, "pipe"] },
    ),
  );
  const lines = linesOf(reader ?? (proc.stdout as Readable));
  let stderr = "";
  proc.stderr?.on("data", (c: Buffer) => (stderr += c.toString()));
  await until(() => lines.some((l) => l.includes('"msg":"listening"')), `the service to listen (${stderr})`, 600, 50);
  return { proc, lines };
}

/** A line logged now (SIGHUP's), read: the service still logs through its own descriptor. */
async function logsAgain(svc: { proc: ChildProcess; lines: string[] }): Promise<void> {
  svc.proc.kill("SIGHUP");
  await until(() => svc.lines.some((l) => l.includes('"msg":"SIGHUP: checking')), "a line logged after SIGHUP", 400, 50);
}

describe.runIf(existsSync("/proc/self/fdinfo"))("a service whose stdout pipe another process writes to as well", () => {
  it("leaves the shared pipe blocking for the other writer (a named pipe)", async () => {
    const fifo = path.join(dir, "out");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writeFd = openSync(fifo, constants.O_WRONLY); // the other writer's, shared with the service's fd 1
    const reader = new net.Socket({ fd: readFd, readable: true, writable: false });
    try {
      expect(nonBlocking(`/proc/self/fdinfo/${writeFd}`)).toBe(false);
      const svc = await start(writeFd, reader);
      try {
        expect(nonBlocking(`/proc/self/fdinfo/${writeFd}`)).toBe(false);
        await logsAgain(svc);
        expect(nonBlocking(`/proc/self/fdinfo/${writeFd}`)).toBe(false);
        expect(await stopProcess(svc.proc)).toBe(0);
      } finally {
        svc.proc.kill("SIGKILL");
      }
    } finally {
      closeSync(writeFd);
      reader.destroy();
    }
  }, 60_000);

  it("leaves its fd 1 blocking (an anonymous pipe: a shell's `serve | cat`)", async () => {
    // The shell's pipe, not node's "pipe" (a socket pair); `cat` copies the lines to the test.
    const command = [process.execPath, CLI, "serve", "--port", "0", "--grpc-port", "0", "--host", "127.0.0.1"]
      .concat(["--config", path.join(ROOT, "examples/rules.yaml")])
      .map((a) => `'${a}'`)
      .join(" ");
    const shell = track(
      spawn("sh", ["-c", `${command} | cat`], { env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "pipe", "pipe"] }),
    );
    const lines = linesOf(shell.stdout);
    await until(() => lines.some((l) => l.includes('"msg":"listening"')), "the service to listen", 600, 50);
    const pid = childOf(shell.pid as number, "serve");
    try {
      expect(nonBlocking(`/proc/${pid}/fdinfo/1`)).toBe(false);
      process.kill(Number(pid), "SIGTERM");
      await until(
        () => !existsSync(`/proc/${pid}/cmdline`) || readFileSync(`/proc/${pid}/cmdline`, "utf8") === "",
        "the service to exit",
        400,
        50,
      );
      await until(() => lines.some((l) => l.includes('"msg":"shutting down"')), "the line written at shutdown", 400, 50);
    } finally {
      if (existsSync(`/proc/${pid}`)) process.kill(Number(pid), "SIGKILL");
      shell.kill("SIGKILL");
    }
  }, 60_000);
});
