/**
 * `--admin-token-file` and the Redis TLS files (`--redis-tls-ca`, `--redis-tls-cert`,
 * `--redis-tls-key`) named as a pipe: process substitution (`--admin-token-file <(vault read
 * ...)`) is a usual way to hand a secret over without a file on disk, so pipes must work; but a
 * named pipe (FIFO) nobody writes to blocked `serve` for good at start, before it listened or said
 * anything (its open, then its read, wait for a writer, synchronously). Now it waits a bounded
 * time (SECRET_WAIT_MS) for the writer and its data, then refuses with the flag named; a writer
 * that comes within the wait is read; a device that never ends (/dev/zero) is refused by size.
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { track } from "../../../../test-support/process.js";
import { CLI, startServiceProcess, type ServiceProc } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-secret-pipe-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const rules = path.join(dir, "rules.yaml");
writeFileSync(
  rules,
  "domains:\n  - domain: d\n    descriptors:\n      - key: k\n        algorithm: gcra\n        limit: 5\n        window: 1s\n",
);
const GOOD = "Zq8v1X3kP0aY7mB2cR5tW9nL4sD6fH1j";
const running: ServiceProc[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
});

let n = 0;
/** A named pipe readable by its owner only (as a secret must be). */
function fifo(): string {
  const p = path.join(dir, `fifo-${n++}`);
  expect(spawnSync("mkfifo", ["-m", "600", p]).status).toBe(0);
  chmodSync(p, 0o600);
  return p;
}

/** `serve` expected to refuse to start: its exit code and stderr; killed after 30 s (a hang). */
function refusal(args: string[]): { status: number | null; signal: string | null; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, "serve", "--config", rules, "--port", "0", "--grpc-port", "0", "--no-watch", ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env: { PATH: process.env.PATH ?? "" },
  });
  return { status: r.status, signal: r.signal, stderr: r.stderr };
}

describe("a secret file that is a pipe", () => {
  it("a named pipe nobody writes to: refused after the wait, naming the flag, not a hang", () => {
    const r = refusal(["--admin-token-file", fifo()]);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--admin-token-file: cannot read .*fifo-\d+ \(a named pipe \(FIFO\): nothing was written to it within 5 s/);
  }, 40_000);

  it("the same for a Redis TLS file", () => {
    const r = refusal(["--redis", "rediss://127.0.0.1:1", "--redis-tls-ca", fifo()]);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--redis-tls-ca: cannot read .*fifo-\d+: a named pipe \(FIFO\): nothing was written to it within 5 s/);
  }, 40_000);

  it("a device that never ends is refused by size", () => {
    const r = refusal(["--redis", "rediss://127.0.0.1:1", "--redis-tls-ca", "/dev/zero"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--redis-tls-ca: cannot read \/dev\/zero: more than 65536 bytes/);
  }, 40_000);

  it("a writer that comes within the wait is read, and the service starts with its token", async () => {
    const p = fifo();
    // The writer opens the pipe a second after serve started, as a slow secret fetch would.
    const writer = track(spawn("sh", ["-c", `sleep 1; printf '%s\\n' '${GOOD}' > '${p}'`], { stdio: "ignore" }));
    const written = new Promise((r) => writer.once("exit", r));
    const svc = await startServiceProcess(["--config", rules, "--no-watch", "--admin-token-file", p]);
    running.push(svc);
    await written;
    const denied = await fetch(`${svc.base}/v1/admin/keys/d/k=1`);
    const allowed = await fetch(`${svc.base}/v1/admin/keys/d/k=1`, { headers: { authorization: `Bearer ${GOOD}` } });
    expect([denied.status, allowed.status]).toEqual([401, 200]);
  }, 40_000);

  it("an anonymous pipe (bash's process substitution) still works", async () => {
    // `--admin-token-file <(printf ...)`: the service gets /dev/fd/N, a pipe its writer closes.
    const script = `exec "$0" "$@" --admin-token-file <(sleep 0.5; printf '%s\\n' '${GOOD}')`;
    const proc = track(
      spawn(
        "bash",
        [
          "-c",
          script,
          process.execPath,
          CLI,
          "serve",
          "--config",
          rules,
          "--no-watch",
          "--port",
          "0",
          "--grpc-port",
          "0",
          "--host",
          "127.0.0.1",
        ],
        {
          stdio: ["ignore", "pipe", "pipe"],
        },
      ),
    );
    let out = "";
    const port = await new Promise<number>((resolve, reject) => {
      proc.stdout.on("data", (c: Buffer) => {
        out += c.toString();
        const m = /"httpPort":(\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      proc.once("exit", (code) => reject(new Error(`exited ${String(code)}: ${out}`)));
    });
    try {
      const allowed = await fetch(`http://127.0.0.1:${port}/v1/admin/keys/d/k=1`, { headers: { authorization: `Bearer ${GOOD}` } });
      expect(allowed.status).toBe(200);
    } finally {
      proc.kill("SIGTERM");
      await new Promise((r) => proc.once("exit", r));
    }
  }, 40_000);
});
