/**
 * A line saying the process stops (logStopping: "shutting down", "stopped") logged while stdout, a
 * pipe, is being read slowly: lines were dropped while the hold was full, then the reader took a
 * little, so the hold is under its bound but not empty. The line must still come after the count
 * of the lines dropped before it, so that the log ends with it (docs/service.md). Played in a child
 * whose stdout is a FIFO the test reads a fixed number of bytes from, then all of.
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, readSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { until } from "../../../../test-support/process.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-log-partly-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Logs far more than the pipe and the hold take (the rest dropped), says so, and once told (the
// test has read a little meanwhile), logs "stopped" through logStopping and closes the log.
const CHILD = (logJs: string) => `import { closeLog, createLogger, logStopping } from ${JSON.stringify(logJs)};
const log = createLogger("info");
const pad = "y".repeat(1000);
for (let i = 0; i < 300; i++) log.info({ i, pad }, "while stalled");
process.stderr.write("filled\\n");
process.stdin.once("data", () => setImmediate(async () => {
  logStopping(log, () => log.info("stopped"));
  process.stderr.write("logged\\n");
  await closeLog(log, 30000);
  process.stderr.write("done\\n");
  process.exit(0);
}));`;

describe("a line saying the process stops, logged while a slow reader has taken part of the hold", () => {
  it("is written after the count of the lines dropped before it: the log ends with it", async () => {
    const fifo = path.join(dir, "out");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writeFd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    const logJs = path.resolve(import.meta.dirname, "../../dist/log.js");
    const child = spawn(process.execPath, ["--input-type=module", "-e", CHILD(logJs)], { stdio: ["pipe", writeFd, "pipe"] });
    closeSync(writeFd);
    let stderr = "";
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      child.stderr?.on("data", (c: Buffer) => {
        stderr += c.toString();
        if (stderr.includes("filled\n")) resolve();
      });
      void exited.then(() => reject(new Error(`the child ended before it filled its stdout: ${stderr}`)));
    });
    // A slow reader: 8 KiB taken, the line libuv was writing completes, and the hold falls under its
    // bound (16 KiB) but is not empty; then, once the child has logged "stopped", all of it.
    const first = Buffer.alloc(8192);
    const n = readSync(readFd, first, 0, first.length, null);
    expect(n).toBe(8192);
    child.stdin?.write("go\n");
    await until(() => stderr.includes("logged\n"), 'the child to log "stopped"', 400, 50);
    const reader = new net.Socket({ fd: readFd, readable: true, writable: false });
    let text = first.toString("utf8");
    reader.on("data", (c: Buffer) => (text += c.toString("utf8")));
    await new Promise<void>((resolve) => reader.once("end", resolve));
    expect(await exited, stderr).toBe(0);
    const lines = text.split("\n").filter((l) => l.startsWith("{"));
    const msgs = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    const tail = msgs.slice(-3).join(" / ");
    expect(msgs.at(-1), tail).toBe("stopped");
    expect(msgs.at(-2), tail).toMatch(/^log lines dropped/);
    expect(msgs.filter((m) => m.startsWith("log lines dropped"))).toHaveLength(1);
  }, 60_000);
});
