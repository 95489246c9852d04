/**
 * SIGHUP to `ratekeeper serve` (`kill -HUP`, systemd's usual `ExecReload=/bin/kill -HUP
 * $MAINPID`, a closed terminal): it must not stop the service. It killed it at once by the
 * default action (no graceful stop: requests in flight cut). Now it checks the rules file now (as
 * a change would: a new good file applies, a bad one is refused and the rules stay) and says so;
 * with --no-watch it says the rules stay. (Whether the check ran because of the signal or of the
 * file's own change event cannot be told apart from outside; the survival and the line can.)
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { until } from "../../../../test-support/process.js";
import { call } from "../overrides-support.js";
import { startServiceProcess } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-sighup-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const rules = (limit: number) =>
  `domains:\n  - domain: api\n    descriptors:\n      - key: user_id\n        algorithm: fixed-window\n        limit: ${limit}\n        window: 1m\n`;
const limitOf = async (base: string) =>
  (await call(base, "POST", "/v1/check", { body: { domain: "api", descriptors: [[{ key: "user_id", value: "u" }]] } })).body.statuses[0]
    .limit as number;

describe("SIGHUP", () => {
  it("keeps the service up (and a graceful stop later, exit 0); it checks the rules, and a new file applies", async () => {
    const file = path.join(dir, "rules.yaml");
    writeFileSync(file, rules(5));
    const svc = await startServiceProcess(["--config", file, "--reload-settle", "100"]);
    try {
      expect(await limitOf(svc.base)).toBe(5);
      svc.proc.kill("SIGHUP");
      await until(() => svc.lines.some((l) => l.includes('"signal":"SIGHUP"')), "the SIGHUP line", 600, 50);
      expect(svc.proc.exitCode, svc.lines.join("\n")).toBeNull();
      expect(svc.proc.signalCode).toBeNull();
      expect(await limitOf(svc.base)).toBe(5);
      writeFileSync(file, rules(7));
      svc.proc.kill("SIGHUP");
      await until(async () => (await limitOf(svc.base)) === 7, "the new rules after SIGHUP", 300, 100);
      expect(await svc.stop()).toBe(0);
    } finally {
      await svc.stop();
    }
  }, 60_000);

  it("with --no-watch: the service stays up, says the rules stay", async () => {
    const file = path.join(dir, "fixed.yaml");
    writeFileSync(file, rules(5));
    const svc = await startServiceProcess(["--config", file, "--no-watch"]);
    try {
      writeFileSync(file, rules(9));
      svc.proc.kill("SIGHUP");
      await until(() => svc.lines.some((l) => l.includes('"signal":"SIGHUP"')), "the SIGHUP line", 600, 50);
      expect(svc.lines.find((l) => l.includes('"signal":"SIGHUP"'))).toMatch(/--no-watch/);
      expect(await limitOf(svc.base)).toBe(5);
      expect(await svc.stop()).toBe(0);
    } finally {
      await svc.stop();
    }
  }, 60_000);
});
