/**
 * SIGTERM the moment the service says it is listening (an orchestrator stopping a pod that has
 * just started, a supervisor's restart): the service stops gracefully and exits 0. The
 * "listening" line is written synchronously, so a signal can arrive before the service has
 * returned to the command that waits for signals: the command listens for them from before the
 * service starts, or the default action kills it (no graceful stop, exit by signal).
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

/** Starts `serve`, sends SIGTERM as soon as its "listening" line arrives; resolves its exit code and signal. */
async function termAtListening(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const args = [CLI, "serve", "--port", "0", "--grpc-port", "0", "--host", "127.0.0.1", "--config", path.join(ROOT, "examples/rules.yaml")];
  const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RATEKEEPER_"))), LOG_LEVEL: "info" };
  const proc = track(spawn(process.execPath, args, { stdio: ["ignore", "pipe", "ignore"], env }));
  started.push(proc);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once("exit", (code, signal) => resolve({ code, signal })),
  );
  let out = "";
  proc.stdout?.on("data", (chunk: Buffer) => {
    const had = out.includes('"msg":"listening"');
    out += chunk.toString("utf8");
    if (!had && out.includes('"msg":"listening"')) proc.kill("SIGTERM");
  });
  return exited;
}

describe("SIGTERM as the service starts", () => {
  it("right after the listening line: a graceful stop, exit 0, every time", async () => {
    const results = [];
    for (let i = 0; i < 6; i++) results.push(await termAtListening());
    expect(results).toEqual(Array.from({ length: 6 }, () => ({ code: 0, signal: null })));
  }, 120_000);
});
