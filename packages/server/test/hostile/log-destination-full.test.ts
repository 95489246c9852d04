/**
 * The service's stdout redirected to a file that cannot take more for a while (a full disk:
 * ENOSPC; a quota: EDQUOT; here the file size limit: EFBIG, which needs no root and clears the
 * same way). The service must live on, keep no more than a bound of the lines it could not write,
 * and log again once the file can be written: before, the first error of the destination
 * dropped every later line until a restart, so a disk that filled up once left it silent.
 * Played in a child under `prlimit --fsize` whose stdout is the file opened for appending; the
 * file is emptied while the child waits, as freeing the disk would.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync, statSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const dir = mkdtempSync(path.join(tmpdir(), "rk-log-full-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const LIMIT = 4 * 1024 * 1024;
// The child: fills the file to its limit, logs 10 MB more while it cannot be written, says so on
// stderr, waits for a line on stdin (the file emptied), logs one more line and ends.
const CHILD = (logJs: string) => `import { createLogger } from ${JSON.stringify(logJs)};
import { writeSync } from "node:fs";
const log = createLogger("info");
try { for (;;) writeSync(1, "x".repeat(65536)); } catch (e) { process.stderr.write("full: " + e.code + "\\n"); }
const pad = "y".repeat(5000);
for (let i = 0; i < 2000; i++) log.info({ i, pad }, "while full");
process.stderr.write("waiting\\n");
process.stdin.once("data", () => {
  log.info("after the disk was freed");
  log.info("and the next one");
  process.stderr.write("done\\n");
  process.exit(0);
});`;

// The same, ending with closeLog (as `ratekeeper serve` does at shutdown) while the file is full.
const CLOSING_CHILD = (logJs: string) => `import { closeLog, createLogger } from ${JSON.stringify(logJs)};
import { writeSync } from "node:fs";
const log = createLogger("info");
try { for (;;) writeSync(1, "x".repeat(65536)); } catch (e) { process.stderr.write("full: " + e.code + "\\n"); }
const pad = "y".repeat(5000);
for (let i = 0; i < 2000; i++) log.info({ i, pad }, "while full");
process.stderr.write("closing\\n");
await closeLog(log, 30000);
process.stderr.write("done\\n");
process.exit(0);`;

// The same, its last line one that says it stops (logStopping, as `ratekeeper serve` logs
// "shutting down" and "stopped"), logged while the file is full.
const STOPPING_CHILD = (logJs: string) => `import { closeLog, createLogger, logStopping } from ${JSON.stringify(logJs)};
import { writeSync } from "node:fs";
const log = createLogger("info");
try { for (;;) writeSync(1, "x".repeat(65536)); } catch (e) { process.stderr.write("full: " + e.code + "\\n"); }
const pad = "y".repeat(5000);
for (let i = 0; i < 2000; i++) log.info({ i, pad }, "while full");
logStopping(log, () => log.info("stopped"));
process.stderr.write("closing\\n");
await closeLog(log, 30000);
process.stderr.write("done\\n");
process.exit(0);`;

// closeLog while the file stays full, and nothing else to keep the process alive: the wait is
// its bound, then the process goes on (here: says so and exits 0).
const WAITING_CHILD = (logJs: string) => `import { closeLog, createLogger } from ${JSON.stringify(logJs)};
import { writeSync } from "node:fs";
const log = createLogger("info");
try { for (;;) writeSync(1, "x".repeat(65536)); } catch (e) { process.stderr.write("full: " + e.code + "\\n"); }
for (let i = 0; i < 20; i++) log.info({ i, pad: "y".repeat(5000) }, "while full");
await closeLog(log, 300);
process.stderr.write("done\\n");
process.exit(0);`;

const COUNT = "log lines dropped: stdout took no more for a while (held lines were written first)";

/** The lines held while the file was full: in order, and bounded (at most 64 KiB of 10 MB). */
function expectKept(kept: string[], msgs: string[]): void {
  expect(msgs.every((m) => m === "while full")).toBe(true);
  const ids = kept.map((l) => (JSON.parse(l) as { i: number }).i);
  expect(ids).toEqual([...ids].sort((a, b) => a - b));
  expect(kept.join("\n").length).toBeLessThanOrEqual(64 * 1024);
}

describe("the log destination failing for a while (a full disk)", () => {
  it("the process lives on, keeps a bounded part of the lines meanwhile, and logs again once the file can be written", async () => {
    const file = path.join(dir, "service.log");
    const fd = openSync(file, "a");
    const logJs = path.resolve(import.meta.dirname, "../../dist/log.js");
    const child = spawn("prlimit", [`--fsize=${LIMIT}`, process.execPath, "--input-type=module", "-e", CHILD(logJs)], {
      stdio: ["pipe", fd, "pipe"],
    });
    closeSync(fd);
    let stderr = "";
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      child.stderr?.on("data", (c: Buffer) => {
        stderr += c.toString();
        if (stderr.includes("waiting\n")) resolve();
      });
      void exited.then(() => reject(new Error(`the child ended before it waited: ${stderr}`)));
    });
    expect(stderr).toContain("full: EFBIG");
    expect(statSync(file).size).toBe(LIMIT);
    // The disk freed: the file emptied (the child appends, so it writes at the new end).
    truncateSync(file, 0);
    child.stdin?.write("go\n");
    expect(await exited, stderr).toBe(0);
    expect(stderr).toBe("full: EFBIG\nwaiting\ndone\n");

    const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
    const msgs = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    // Both lines logged after the file could be written again, in order and whole, after the
    // count of the lines dropped meanwhile.
    expect(msgs.slice(-3)).toEqual([COUNT, "after the disk was freed", "and the next one"]);
    // What was kept from the outage is written first, in order, and bounded: of 10 MB logged
    // meanwhile, a few lines (at most 64 KiB) are held (the rest is dropped, not buffered without end).
    const kept = lines.slice(0, -3);
    expectKept(kept, msgs.slice(0, -3));
    expect((JSON.parse(lines.at(-3) as string) as { dropped: number }).dropped).toBe(2000 - kept.length);
  }, 60_000);

  /** The JSON lines of a log file, and their messages. */
  function logLines(file: string) {
    const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
    return { lines, msgs: lines.map((l) => (JSON.parse(l) as { msg: string }).msg) };
  }

  /**
   * Runs a child (one of the *_CHILD sources above, given dist/log.js) under prlimit's file-size
   * bound, its stdout appended to `name` in the test's directory; when the child says "closing"
   * on stderr, the disk is freed (the file emptied; the child appends, so it writes at the new
   * end), at once or `freeAfterMs` later. Returns its exit code, its stderr and the file.
   */
  async function runFull(name: string, source: (logJs: string) => string, stdin: "pipe" | "ignore", freeAfterMs = 0) {
    const file = path.join(dir, name);
    const fd = openSync(file, "a");
    const logJs = path.resolve(import.meta.dirname, "../../dist/log.js");
    const child = spawn("prlimit", [`--fsize=${LIMIT}`, process.execPath, "--input-type=module", "-e", source(logJs)], {
      stdio: [stdin, fd, "pipe"],
    });
    closeSync(fd);
    let stderr = "";
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.stderr?.on("data", (c: Buffer) => {
      stderr += c.toString();
      if (!stderr.endsWith("closing\n")) return;
      if (freeAfterMs === 0) truncateSync(file, 0);
      else setTimeout(() => truncateSync(file, 0), freeAfterMs);
    });
    return { code: await exited, stderr, file };
  }

  it("at exit, what is held is written if the file can take it within the bounded wait (closeLog)", async () => {
    // The exit waits for the held lines: the disk freed meanwhile.
    const { code, stderr, file } = await runFull("exit.log", CLOSING_CHILD, "pipe");
    expect(code, stderr).toBe(0);
    expect(stderr).toBe("full: EFBIG\nclosing\ndone\n");
    const { lines, msgs } = logLines(file);
    expect(msgs.at(-1)).toBe(COUNT);
    expectKept(lines.slice(0, -1), msgs.slice(0, -1));
    expect(lines.length).toBeGreaterThan(1);
  }, 60_000);

  it("closeLog waits its bound for a file that stays full even when nothing else keeps the process alive, then returns", async () => {
    const { code, stderr } = await runFull("waiting.log", WAITING_CHILD, "ignore");
    // Before: exit code 13 (a top-level await never settled) as soon as the wait began.
    expect(code, stderr).toBe(0);
    expect(stderr).toBe("full: EFBIG\ndone\n");
  }, 60_000);

  it("a line saying the process stops, logged while the file is full, is kept past the bound and written at exit, after the count", async () => {
    const { code, stderr, file } = await runFull("stopping.log", STOPPING_CHILD, "pipe");
    expect(code, stderr).toBe(0);
    expect(stderr).toBe("full: EFBIG\nclosing\ndone\n");
    const { lines, msgs } = logLines(file);
    expect(msgs.slice(-2)).toEqual([COUNT, "stopped"]);
    expectKept(lines.slice(0, -2), msgs.slice(0, -2));
    expect((JSON.parse(lines.at(-2) as string) as { dropped: number }).dropped).toBe(2000 - (lines.length - 2));
  }, 60_000);

  it("the exit's retries while the file is still full count no line as dropped: the log still ends with the count, then stopped", async () => {
    // The disk freed 350 ms into closeLog's wait, after a few of its retries (every 100 ms).
    const { code, stderr, file } = await runFull("stopping-late.log", STOPPING_CHILD, "pipe", 350);
    expect(code, stderr).toBe(0);
    const { lines, msgs } = logLines(file);
    // Before: each retry was counted as a dropped line, and "log lines dropped" (dropped: 4) came after "stopped".
    expect(msgs.slice(-2)).toEqual([COUNT, "stopped"]);
    expect((JSON.parse(lines.at(-2) as string) as { dropped: number }).dropped).toBe(2000 - (lines.length - 2));
  }, 60_000);
});
