/**
 * A second stop signal while a graceful stop waits (Ctrl-C pressed again, `kill` after Ctrl-C):
 * the service exits at once, by that signal, as most servers do. Before, the first SIGTERM or
 * SIGINT left the other signal's listener in place, which then swallowed it: after Ctrl-C, a
 * `kill` did nothing until the shutdown timeout. Here a client holds the stop: its request's
 * headers are sent but not its body, so the graceful stop waits (up to its 10 s timeout) for it.
 */
import net from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, startServiceProcess } from "../support.js";

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 600 && !cond(); i++) await new Promise((r) => setTimeout(r, 50));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

describe("a second stop signal during a graceful stop", () => {
  for (const [first, second] of [
    ["SIGTERM", "SIGINT"],
    ["SIGINT", "SIGTERM"],
    ["SIGTERM", "SIGTERM"],
  ] as const)
    it(`${first} then ${second}: the process exits by ${second}, not after the graceful stop`, async () => {
      const svc = await startServiceProcess(["--config", path.join(ROOT, "examples/rules.yaml")]);
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        svc.proc.once("exit", (code, signal) => resolve({ code, signal })),
      );
      const sock = net.connect(svc.httpPort, "127.0.0.1");
      sock.on("error", () => {});
      await new Promise<void>((r) => sock.once("connect", () => r()));
      sock.write("POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{");
      svc.proc.kill(first);
      await until(() => svc.lines.some((l) => l.includes('"msg":"shutting down"')), "the graceful stop to begin");
      svc.proc.kill(second);
      const how = await exited;
      sock.destroy();
      expect(how).toEqual({ code: null, signal: second });
    }, 60_000);
});
