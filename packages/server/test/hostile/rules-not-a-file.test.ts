/**
 * A rules path that is not a regular file: a named pipe (FIFO), a character device such as
 * /dev/zero, given as --config or found in a config directory, at start or on a reload. Opening a
 * FIFO for reading waits, on the event loop, for a writer that never comes (the service never
 * listened, or stopped answering at a reload, /healthz included), and /dev/zero was read to the
 * size bound and refused as "over the limit (raise it with --max-rules-bytes)", advice that can
 * only make it worse. Each is refused at once naming the path and what it is; a running service
 * keeps its last good rules.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { until } from "../../../../test-support/process.js";
import { call } from "../overrides-support.js";
import { CLI, startServiceProcess } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-rules-not-a-file-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rules = (limit: number) =>
  `domains:\n  - domain: api\n    descriptors:\n      - key: user_id\n        algorithm: fixed-window\n        limit: ${limit}\n        window: 1m\n`;
const limitOf = async (base: string) =>
  (await call(base, "POST", "/v1/check", { body: { domain: "api", descriptors: [[{ key: "user_id", value: "u" }]] } })).body.statuses[0]
    .limit as number;

function fifo(name: string): string {
  const p = path.join(mkdtempSync(path.join(dir, "f-")), name);
  expect(spawnSync("mkfifo", [p]).status).toBe(0);
  return p;
}

/** `ratekeeper <args>`, killed if it has not ended in 15 s (a hang). */
function cli(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 15_000, killSignal: "SIGKILL" });
}

const NOT_A_FILE = "not a regular file";

describe("a rules path that is not a regular file", () => {
  it("a named pipe as --config, or in a config directory: refused at start and by `config check`, naming it", () => {
    const pipe = fifo("rules.yaml");
    const serve = cli(["serve", "--config", pipe, "--port", "0", "--grpc-port", "0"]);
    expect(serve.signal, "serve hung on the FIFO").toBeNull();
    expect(serve.status).toBe(2);
    expect(serve.stderr).toContain(`${pipe}: is a named pipe (FIFO), ${NOT_A_FILE}`);
    const check = cli(["config", "check", pipe]);
    expect(check.signal, "config check hung on the FIFO").toBeNull();
    expect(check.status).toBe(1);
    expect(check.stderr).toContain(`${pipe}: is a named pipe (FIFO), ${NOT_A_FILE}`);

    const inDir = fifo("b.yaml");
    writeFileSync(path.join(path.dirname(inDir), "a.yaml"), rules(5));
    const serveDir = cli(["serve", "--config", path.dirname(inDir), "--port", "0", "--grpc-port", "0"]);
    expect(serveDir.signal, "serve hung on the directory's FIFO").toBeNull();
    expect(serveDir.status).toBe(2);
    expect(serveDir.stderr).toContain(`${inDir}: is a named pipe (FIFO), ${NOT_A_FILE}`);
  }, 60_000);

  it("/dev/zero is refused as a device, not read to the size bound and called too large", () => {
    const check = cli(["config", "check", "/dev/zero"]);
    expect(check.status).toBe(1);
    expect(check.stderr).toContain(`/dev/zero: is a character device, ${NOT_A_FILE}`);
    expect(check.stderr).not.toContain("--max-rules-bytes");
  }, 30_000);

  it("a rules file replaced by a named pipe, then SIGHUP: the reload is refused naming it, the service answers with the last good rules", async () => {
    const file = path.join(dir, "live.yaml");
    writeFileSync(file, rules(5));
    const svc = await startServiceProcess(["--config", file, "--reload-settle", "100"]);
    try {
      expect(await limitOf(svc.base)).toBe(5);
      renameSync(fifo("next.yaml"), file);
      svc.proc.kill("SIGHUP");
      const refused = () => svc.lines.find((l) => l.includes("rules reload failed") && l.includes(NOT_A_FILE));
      await until(() => refused() !== undefined, "the reload refused", 300, 50);
      expect(JSON.parse(refused() ?? "{}")).toMatchObject({
        file,
        errors: [`${file}: is a named pipe (FIFO), ${NOT_A_FILE}: rules are read from a regular file or a directory of them`],
      });
      expect(await limitOf(svc.base)).toBe(5);
      writeFileSync(path.join(dir, "good.yaml"), rules(7));
      renameSync(path.join(dir, "good.yaml"), file);
      svc.proc.kill("SIGHUP");
      await until(async () => (await limitOf(svc.base)) === 7, "the next good rules", 300, 100);
      expect(await svc.stop()).toBe(0);
    } finally {
      await svc.stop();
    }
  }, 60_000);

  it("a named pipe added to a config directory, then SIGHUP: the reload is refused naming it, the last good rules stay", async () => {
    const rulesDir = path.join(dir, "live-dir");
    mkdirSync(rulesDir);
    writeFileSync(path.join(rulesDir, "a.yaml"), rules(5));
    const svc = await startServiceProcess(["--config", rulesDir, "--reload-settle", "100"]);
    try {
      expect(await limitOf(svc.base)).toBe(5);
      writeFileSync(path.join(rulesDir, "a.yaml"), rules(7));
      const pipe = path.join(rulesDir, "b.yaml");
      renameSync(fifo("b.yaml"), pipe);
      svc.proc.kill("SIGHUP");
      const refused = () => svc.lines.find((l) => l.includes("rules reload failed") && l.includes(NOT_A_FILE));
      await until(() => refused() !== undefined, "the reload refused", 300, 50);
      expect(refused()).toContain(`${pipe}: is a named pipe (FIFO), ${NOT_A_FILE}`);
      expect(await limitOf(svc.base), "the change beside the pipe is not applied alone").toBe(5);
      rmSync(pipe);
      svc.proc.kill("SIGHUP");
      await until(async () => (await limitOf(svc.base)) === 7, "the directory's rules once the pipe is gone", 300, 100);
      expect(await svc.stop()).toBe(0);
    } finally {
      await svc.stop();
    }
  }, 60_000);
});
