/**
 * The service's stdout taken away (its reader died: `ratekeeper serve | tee log` with tee killed,
 * a log shipper gone): SIGTERM still stops it. pino's default destination writes asynchronously
 * and, at exit, flushes what is left synchronously; on a pipe with no reader that flush met EPIPE
 * and retried it every 100 ms for good (sonic-boom's flushSync retries every error), so the
 * service had stopped serving but never exited, until a second signal or SIGKILL.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { hasExited, track } from "../../../../test-support/process.js";
import { CLI, ROOT } from "../support.js";

const started: ReturnType<typeof spawn>[] = [];
afterAll(() => {
  for (const p of started) if (!hasExited(p)) p.kill("SIGKILL");
});

describe("a service whose stdout has no reader", () => {
  it("stops on SIGTERM, exit 0", async () => {
    const args = [
      CLI,
      "serve",
      "--port",
      "0",
      "--grpc-port",
      "0",
      "--host",
      "127.0.0.1",
      "--config",
      path.join(ROOT, "examples/rules.yaml"),
    ];
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RATEKEEPER_"))), LOG_LEVEL: "info" };
    const proc = track(spawn(process.execPath, args, { stdio: ["ignore", "pipe", "ignore"], env }));
    started.push(proc);
    await new Promise<void>((resolve, reject) => {
      let out = "";
      proc.stdout?.on("data", (chunk: Buffer) => {
        out += chunk.toString("utf8");
        if (out.includes('"msg":"listening"')) resolve();
      });
      proc.once("exit", (code) => reject(new Error(`exited (${String(code)}) before listening:\n${out}`)));
    });
    // Our end of its stdout closed: the pipe has no reader; its next log line meets EPIPE.
    proc.stdout?.destroy();
    const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
    proc.kill("SIGTERM");
    // A generous bound (no request is in flight, so shutdown has nothing to wait for).
    const code = await Promise.race([
      exited,
      new Promise<string>((resolve) => setTimeout(() => resolve("still running after 20 s"), 20_000)),
    ]);
    expect(code).toBe(0);
  }, 60_000);
});
