/**
 * An application embedding the service (`startService()` without a `logger` option) that starts
 * and stops it again and again: a test suite's beforeEach/afterEach, a supervisor restarting it
 * on a new configuration. The logger the service made for itself writes to stdout through its
 * own handle (with stdout a pipe: a descriptor of the pipe opened again, log-destination.ts
 * ownPipe). Stopping the service must release it, or each cycle keeps one more descriptor, one
 * more handle and one more logger for good, until the process meets EMFILE.
 * Played in a child whose stdout is a pipe (as under a container runtime or a log shipper), with
 * the process's descriptors and handles counted before and after 12 cycles; the lines the
 * service logged must still reach stdout ("stopped" once per cycle), and the process's own
 * stdout must still work after them (libuv never closes descriptors 0-2).
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { track } from "../../../../test-support/process.js";
import { ROOT } from "../support.js";

const CYCLES = 12;
const dir = mkdtempSync(path.join(tmpdir(), "rk-embed-cycles-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CHILD = `
import { readdirSync } from "node:fs";
import { startService } from "${ROOT}/packages/server/dist/index.js";
const count = () => ({ fds: readdirSync("/proc/self/fd").length, handles: process.getActiveResourcesInfo().length });
const cycle = async () => {
  const svc = await startService({ configFile: "${ROOT}/examples/rules.yaml", port: 0, grpcPort: 0, host: "127.0.0.1", watch: false });
  await svc.close();
  // A start that fails (its rules file gone) ends its logger too.
  await startService({ configFile: "${ROOT}/examples/no-such-rules.yaml", port: 0, grpcPort: 0 }).then(
    () => { throw new Error("started without rules"); },
    (e) => { if (e.message === "started without rules") throw e; },
  );
};
await cycle(); // the first one loads what every later one shares (modules, grpc's threads)
const before = count();
for (let i = 1; i < ${CYCLES}; i++) await cycle();
await new Promise((r) => setTimeout(r, 200));
const after = count();
process.stdout.write("stdout still works\\n");
process.stderr.write(JSON.stringify({ before, after }) + "\\n");
`;

interface Run {
  code: number | null;
  stdout: string;
  counts: { before: { fds: number; handles: number }; after: { fds: number; handles: number } };
}

/** Runs the child with stdout a named pipe (a FIFO, as a shell's `| shipper` or a runtime gives) read by the test. */
function run(): Promise<Run> {
  const fifo = path.join(dir, "out");
  expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
  const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(fifo, constants.O_WRONLY);
  const proc = track(spawn(process.execPath, ["--input-type=module", "-e", CHILD], { stdio: ["ignore", writeFd, "pipe"] }));
  closeSync(writeFd);
  let stdout = "";
  let stderr = "";
  const reader = new net.Socket({ fd: readFd, readable: true, writable: false });
  reader.on("data", (c: Buffer) => (stdout += c.toString()));
  proc.stderr?.on("data", (c: Buffer) => (stderr += c.toString()));
  const read = new Promise((resolve) => reader.once("close", resolve));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", resolve));
  return Promise.all([exited, read]).then(([code]) => {
    const last = stderr.trim().split("\n").at(-1) ?? "";
    expect(last, stderr).toMatch(/^\{"before"/);
    return { code, stdout, counts: JSON.parse(last) as Run["counts"] };
  });
}

describe("startService() started and stopped again and again without a logger of the caller's", () => {
  it("keeps no descriptor or handle per cycle, and its lines still reach stdout", async () => {
    const r = await run();
    expect(r.code).toBe(0);
    expect(r.counts.after.fds).toBeLessThanOrEqual(r.counts.before.fds);
    expect(r.counts.after.handles).toBeLessThanOrEqual(r.counts.before.handles);
    const stopped = r.stdout.split("\n").filter((l) => l.includes('"msg":"stopped"'));
    expect(stopped).toHaveLength(CYCLES);
    expect(r.stdout).toContain("stdout still works\n");
  }, 60_000);
});
