/**
 * An error nothing catches while `ratekeeper serve` runs (a bug, a library's callback that
 * throws, a promise rejected with no handler): Node's own handling prints the stack on stderr and
 * exits at once, so one who reads only the JSON log (a log shipper, a container's log driver that
 * keeps stdout) never learns why the service vanished, and lines still held for a slow stdout are
 * lost. The service must log one `fatal` line naming the error and its origin, keep the stack on
 * stderr, wait for the log as any stop does, and exit 1: never carry on in an unknown state.
 * The fault is injected by a module preloaded with NODE_OPTIONS (--require), on SIGUSR2, after
 * the service says it is listening.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startServiceProcess } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-uncaught-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FAULT = path.join(dir, "fault.cjs");
writeFileSync(
  FAULT,
  `process.on("SIGUSR2", () => setImmediate(() => {
  if (process.env.FAULT === "reject") Promise.reject(new Error("injected rejection"));
  else throw new Error("injected fault");
}));\n`,
);

interface Fatal {
  level: number;
  msg: string;
  origin: string;
  err: { message: string; stack: string };
}

async function crash(mode: "throw" | "reject", stderrGone = false): Promise<{ code: number | null; lines: string[]; json: Fatal[] }> {
  const svc = await startServiceProcess([], { NODE_OPTIONS: `--require ${FAULT}`, FAULT: mode });
  const exited = new Promise<number | null>((resolve) => svc.proc.once("exit", resolve));
  // Its reader gone (a supervisor that closed it): each write to stderr fails with EPIPE.
  if (stderrGone) svc.proc.stderr?.destroy();
  svc.proc.kill("SIGUSR2");
  const code = await exited;
  const json = svc.lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Fatal);
  return { code, lines: svc.lines, json };
}

describe("an error nothing catches while the service runs", () => {
  it("with stderr gone (EPIPE on the stack's write): still the fatal line, and the exit", async () => {
    const r = await crash("throw", true);
    expect(r.code).toBe(1);
    expect(r.json.at(-1)?.msg).toBe("uncaught exception: stopping");
  }, 30_000);

  it("a thrown error: one fatal JSON line naming it, the stack on stderr too, exit 1", async () => {
    const r = await crash("throw");
    expect(r.code).toBe(1);
    const last = r.json.at(-1);
    expect(last?.msg).toBe("uncaught exception: stopping");
    expect([last?.level, last?.origin, last?.err.message]).toEqual([60, "uncaughtException", "injected fault"]);
    expect(r.lines.some((l) => l.startsWith("ratekeeper: uncaught exception: Error: injected fault"))).toBe(true);
  }, 30_000);

  it("a promise rejected with no handler: the same, its origin named", async () => {
    const r = await crash("reject");
    expect(r.code).toBe(1);
    const last = r.json.at(-1);
    expect(last?.msg).toBe("unhandled rejection: stopping");
    expect([last?.level, last?.origin, last?.err.message]).toEqual([60, "unhandledRejection", "injected rejection"]);
    expect(r.lines.some((l) => l.startsWith("ratekeeper: unhandled rejection: Error: injected rejection"))).toBe(true);
  }, 30_000);
});
