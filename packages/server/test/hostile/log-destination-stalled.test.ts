/**
 * The service's stdout a pipe whose reader stops reading for a while (a log shipper that stalls,
 * a `| tee` on a frozen terminal): the pipe fills and every write blocks (a blocking pipe) or
 * answers EAGAIN (a non-blocking one, where pino's sonic-boom slept 100 ms and tried again, in a
 * loop, synchronously). Either way the event loop stopped: the service answered no decision
 * until the reader came back, and a SIGTERM meanwhile never ended it. A decision service must
 * keep deciding: lines it cannot write now are held (a bound), dropped past it with a count,
 * and written once the reader reads again; at shutdown what is held is written if the reader
 * takes it within a bounded wait, never holding the exit.
 * Played with `ratekeeper serve` at LOG_LEVEL=debug, flooded with bad `/json` requests (one
 * debug line each), its stdout a pipe the test stops reading: node's own pipe (blocking in the
 * service) and a FIFO opened non-blocking.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, rmSync } from "node:fs";
import { request, Agent } from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { stopProcess, track, until } from "../../../../test-support/process.js";
import { CLI, ROOT } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-log-stall-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A started service whose stdout the test reads, or stops reading, through `out`. */
interface Stalled {
  proc: ChildProcess;
  out: Readable;
  lines: string[];
  port: number;
}

/** How the service's stdout is made: node's pipe, or a FIFO whose both ends are non-blocking. */
const PIPES: Record<string, () => { stdout: "pipe" | number; reader?: Readable; done?: () => void }> = {
  "a pipe (blocking in the service)": () => ({ stdout: "pipe" }),
  "a non-blocking FIFO (EAGAIN)": () => {
    const fifo = path.join(mkdtempSync(path.join(dir, "f-")), "out");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writeFd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    const reader = new net.Socket({ fd: readFd, readable: true, writable: false });
    return { stdout: writeFd, reader, done: () => closeSync(writeFd) };
  },
};

async function start(kind: string): Promise<Stalled> {
  const made = (PIPES[kind] as (typeof PIPES)[string])();
  const proc = track(
    spawn(
      process.execPath,
      [CLI, "serve", "--port", "0", "--grpc-port", "0", "--host", "127.0.0.1", "--config", path.join(ROOT, "examples/rules.yaml")],
      { env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "debug" }, stdio: ["ignore", made.stdout, "pipe"] },
    ),
  );
  made.done?.();
  const out = made.reader ?? (proc.stdout as Readable);
  const lines: string[] = [];
  let buf = "";
  out.on("data", (c: Buffer) => {
    buf += c.toString("utf8");
    let nl: number;
    while ((nl = buf.indexOf("\n")) !== -1) {
      lines.push(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  });
  let stderr = "";
  proc.stderr?.on("data", (c: Buffer) => (stderr += c.toString()));
  await until(() => lines.some((l) => l.includes('"msg":"listening"')), `the service to listen (${stderr})`, 600, 50);
  const port = (JSON.parse(lines.find((l) => l.includes('"msg":"listening"')) as string) as { httpPort: number }).httpPort;
  return { proc, out, lines, port };
}

const agent = new Agent({ keepAlive: true, maxSockets: 32 });
afterAll(() => agent.destroy());

/** POSTs `body` to `path`; resolves the status. */
function post(port: number, urlPath: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path: urlPath, method: "POST", agent, headers: { "content-type": "application/json" } },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** `p`, or a rejection saying what never came: a generous bound, not a timing the test asserts. */
function within<T>(p: Promise<T>, what: string, ms = 20_000): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(t));
}

/** 3000 bad `/json` requests, 32 at a time: a debug line each (about 500 KB in all), far more than a pipe and its reader hold. */
async function flood(port: number): Promise<void> {
  const bad = JSON.stringify({ domain: 5, descriptors: [] });
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next++ < 3000) expect(await post(port, "/json", bad)).toBe(400);
    }),
  );
}

/** Whether a connection to `port` is refused: the service has stopped listening (after its "shutting down" line). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(false);
    });
    s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "ECONNREFUSED"));
  });
}

const check = JSON.stringify({ domain: "web", descriptors: [{ remote_address: "10.0.0.1" }] });
const dropped = (lines: string[]) =>
  lines.filter((l) => l.includes('"msg":"log lines dropped')).map((l) => JSON.parse(l) as { dropped: number });

describe("a service whose stdout's reader stalls", () => {
  for (const kind of Object.keys(PIPES)) {
    it(`keeps answering decisions, drops lines past a bound with a count, and logs again once read (${kind})`, async () => {
      const svc = await start(kind);
      try {
        svc.out.pause();
        await within(flood(svc.port), "the flood of bad /json requests while stdout is not read");
        expect(await within(post(svc.port, "/v1/check", check), "/v1/check while stdout is not read")).toBe(200);
        // The reader back: the held lines, the count of those dropped, then new lines again.
        svc.out.resume();
        await until(() => dropped(svc.lines).length > 0, "the count of dropped lines", 400, 50);
        expect(dropped(svc.lines)[0]?.dropped).toBeGreaterThan(0);
        svc.proc.kill("SIGHUP");
        await until(
          () => svc.lines.some((l) => l.includes('"msg":"SIGHUP: checking')),
          "a line logged after the reader came back",
          400,
          50,
        );
        expect(await stopProcess(svc.proc)).toBe(0);
      } finally {
        svc.proc.kill("SIGKILL");
      }
    }, 90_000);
  }

  it("SIGTERM while the reader stays stalled: the service exits 0 (what is held is given up after a bounded wait)", async () => {
    const svc = await start("a pipe (blocking in the service)");
    try {
      svc.out.pause();
      await within(flood(svc.port), "the flood of bad /json requests while stdout is not read");
      // stopProcess: SIGTERM, then SIGKILL after 20 s (exit code null).
      expect(await stopProcess(svc.proc, "SIGTERM", 20_000)).toBe(0);
    } finally {
      svc.proc.kill("SIGKILL");
    }
  }, 90_000);

  it("SIGTERM, then the reader reads again: the held lines and the count of those dropped are written before the exit", async () => {
    const svc = await start("a pipe (blocking in the service)");
    try {
      svc.out.pause();
      await within(flood(svc.port), "the flood of bad /json requests while stdout is not read");
      const exited = new Promise<number | null>((resolve) => svc.proc.once("exit", (code) => resolve(code)));
      svc.proc.kill("SIGTERM");
      svc.out.resume();
      expect(await within(exited, "the exit after SIGTERM")).toBe(0);
      await new Promise<void>((resolve) => (svc.out.readableEnded ? resolve() : svc.out.once("end", resolve)));
      // What was held is written, and the count of the lines dropped past the bound, and nothing
      // is left: the last line is the service's last ("stopped"), kept in the room reserved for
      // the lines saying it stops when SIGTERM came with the bound full.
      const msgs = svc.lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
      expect(msgs.at(-1), svc.lines.slice(-3).join("\n")).toBe("stopped");
      expect(dropped(svc.lines).length).toBeGreaterThan(0);
      expect(dropped(svc.lines)[0]?.dropped).toBeGreaterThan(0);
    } finally {
      svc.proc.kill("SIGKILL");
    }
  }, 90_000);

  it("SIGTERM while the hold is full, read only once the service has stopped listening: its lines saying it stops are written, after the count of those dropped before them", async () => {
    const svc = await start("a pipe (blocking in the service)");
    try {
      svc.out.pause();
      await within(flood(svc.port), "the flood of bad /json requests while stdout is not read");
      const exited = new Promise<number | null>((resolve) => svc.proc.once("exit", (code) => resolve(code)));
      svc.proc.kill("SIGTERM");
      // The port refused: "shutting down" was logged (before the listener closed), with the hold full.
      await until(() => refused(svc.port), "the service to stop listening", 400, 50);
      svc.out.resume();
      expect(await within(exited, "the exit after SIGTERM")).toBe(0);
      await new Promise<void>((resolve) => (svc.out.readableEnded ? resolve() : svc.out.once("end", resolve)));
      const msgs = svc.lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
      const tail = svc.lines.slice(-4).join("\n");
      const stopping = msgs.indexOf("shutting down");
      expect(stopping, tail).toBeGreaterThan(0);
      expect(msgs.at(-1), tail).toBe("stopped");
      // What was dropped before it is counted before it: the log stays in order.
      expect(msgs[stopping - 1], tail).toMatch(/^log lines dropped/);
      expect(dropped(svc.lines)[0]?.dropped).toBeGreaterThan(0);
    } finally {
      svc.proc.kill("SIGKILL");
    }
  }, 90_000);
});
