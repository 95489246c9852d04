/**
 * `ratekeeper serve` failing to start (a bad rules file, its port in use) with stdout a pipe that
 * takes nothing at that moment (a log shipper slow to read, a pipe already full): the lines it
 * logged before the failure, and the one saying why it stops, are held. The exit must give them
 * the same bounded wait a stop by SIGTERM gives (closeLog), or they are lost, the error that
 * explains the failure with them, for anyone who reads only the JSON log.
 * Played with a FIFO the test fills before the service starts and reads only once the service
 * has said on stderr that it failed (written just before the exit).
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { track } from "../../../../test-support/process.js";
import { CLI } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-start-fail-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A FIFO filled until it takes no more: its write end (for the service) and its read end. */
function fullFifo(): { writeFd: number; readFd: number } {
  const fifo = path.join(mkdtempSync(path.join(dir, "f-")), "out");
  expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
  const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  const filler = `${"x".repeat(1023)}\n`;
  for (;;) {
    try {
      writeSync(writeFd, filler);
    } catch (e) {
      expect((e as NodeJS.ErrnoException).code).toBe("EAGAIN");
      break;
    }
  }
  return { writeFd, readFd };
}

interface Failed {
  code: number | null;
  stderr: string;
  /** The JSON lines read from stdout after the filler. */
  logged: { msg: string; level: number; err?: { message?: string } }[];
}

/** Runs `serve` with `args` on a full FIFO; reads it once stderr says the start failed. */
async function failToStart(args: string[], env: Record<string, string> = {}): Promise<Failed> {
  const { writeFd, readFd } = fullFifo();
  const proc = track(
    spawn(process.execPath, [CLI, "serve", "--grpc-port", "0", "--host", "127.0.0.1", ...args], {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: ["ignore", writeFd, "pipe"],
    }),
  );
  closeSync(writeFd);
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  let stderr = "";
  await new Promise<void>((resolve) => {
    proc.stderr?.on("data", (c: Buffer) => {
      stderr += c.toString();
      if (stderr.includes("ratekeeper")) resolve();
    });
    void exited.then(() => resolve());
  });
  // Only now is the pipe read: what the service still holds is written if it waits for it.
  const reader = new net.Socket({ fd: readFd, readable: true, writable: false });
  let out = "";
  reader.on("data", (c: Buffer) => (out += c.toString("utf8")));
  const ended = new Promise<void>((resolve) => reader.once("end", resolve));
  const code = await exited;
  await ended;
  const logged = out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Failed["logged"][number]);
  return { code, stderr, logged };
}

describe("serve failing to start, its stdout a pipe that takes nothing yet", () => {
  it("a bad rules file: the lines held, and the error, are written before the exit (code 2 as before)", async () => {
    const bad = path.join(dir, "bad.yaml");
    writeFileSync(
      bad,
      "domains:\n  - domain: web\n    descriptors:\n      - key: ip\n        rate_limit: { unit: fortnight, requests_per_unit: 5 }\n",
    );
    const r = await failToStart(["--config", bad, "--port", "0", "--admin-token", "a-token-of-twenty-chars"]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^ratekeeper serve: .*bad\.yaml/);
    const msgs = r.logged.map((l) => l.msg);
    expect(msgs[0], JSON.stringify(r.logged)).toMatch(/^the admin token given with --admin-token/);
    expect(msgs.at(-1)).toBe("start failed");
    expect(r.logged.at(-1)?.err?.message).toContain("bad.yaml");
  }, 60_000);

  it("its port in use: the lines held, and the error, are written before the exit (code 1 as before)", async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      const r = await failToStart(["--port", String(port)]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain("EADDRINUSE");
      const msgs = r.logged.map((l) => l.msg);
      expect(msgs[0], JSON.stringify(r.logged)).toMatch(/^no --config: serving the built-in default rules/);
      expect(msgs.at(-1)).toBe("start failed");
      expect(r.logged.at(-1)?.err?.message).toContain("EADDRINUSE");
    } finally {
      taken.close();
    }
  }, 60_000);
});
