/**
 * The admin token: long enough to resist guessing, and never required on the command line,
 * where every local user reads it (`ps`, /proc/<pid>/cmdline). `--admin-token-file` and
 * RATEKEEPER_ADMIN_TOKEN keep it out of argv; `--admin-token` still works, with a warning.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { chooseAdminToken } from "../../src/cli/admin-token.js";
import { TokenCheck } from "../../src/http-io.js";
import { CLI, startServiceProcess, type ServiceProc } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-hostile-token-"));
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
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `ratekeeper serve` expecting it to refuse to start; returns its stderr. */
function refusal(args: string[], env: Record<string, string> = {}): string {
  const r = spawnSync(process.execPath, [CLI, "serve", "--config", rules, "--port", "0", "--grpc-port", "0", "--no-watch", ...args], {
    encoding: "utf8",
    env: { ...process.env, RATEKEEPER_ADMIN_TOKEN: "", ...env },
    timeout: 30_000,
  });
  expect(r.status, r.stderr).toBe(2);
  return r.stderr;
}

async function adminStatus(svc: ServiceProc, token: string): Promise<number> {
  return (await fetch(`${svc.base}/v1/admin/keys/d/k=1`, { headers: { authorization: `Bearer ${token}` } })).status;
}

describe("admin token", () => {
  it("a short token is refused at start, naming where it came from and the minimum", () => {
    expect(refusal(["--admin-token", "hunter2"])).toMatch(/--admin-token: at least 16 characters \(got 7\)/);
    expect(refusal([], { RATEKEEPER_ADMIN_TOKEN: "x" })).toMatch(/RATEKEEPER_ADMIN_TOKEN: at least 16 characters \(got 1\)/);
    const file = path.join(dir, "short.token");
    writeFileSync(file, "abc\n", { mode: 0o600 });
    expect(refusal(["--admin-token-file", file])).toMatch(/--admin-token-file: at least 16 characters \(got 3\)/);
  });

  it("--admin-token-file: the token stays out of argv and works", async () => {
    const file = path.join(dir, "admin.token");
    writeFileSync(file, `${GOOD}\n`, { mode: 0o600 });
    const svc = await startServiceProcess(["--config", rules, "--no-watch", "--admin-token-file", file], { RATEKEEPER_ADMIN_TOKEN: "" });
    running.push(svc);
    expect(await adminStatus(svc, GOOD)).toBe(200);
    expect(await adminStatus(svc, `${GOOD}x`)).toBe(401);
    if (process.platform === "linux") expect(readFileSync(`/proc/${svc.proc.pid}/cmdline`, "utf8")).not.toContain(GOOD);
    expect(svc.lines.join("\n")).not.toContain(GOOD);
  });

  it("a token file others can read is refused", () => {
    const file = path.join(dir, "open.token");
    writeFileSync(file, GOOD);
    chmodSync(file, 0o644);
    expect(refusal(["--admin-token-file", file])).toMatch(/--admin-token-file: .*readable by other users.*chmod 600/);
  });

  it("RATEKEEPER_ADMIN_TOKEN works without argv; --admin-token works with a warning about ps", async () => {
    const env = await startServiceProcess(["--config", rules, "--no-watch"], { RATEKEEPER_ADMIN_TOKEN: GOOD });
    running.push(env);
    expect(await adminStatus(env, GOOD)).toBe(200);
    const argv = await startServiceProcess(["--config", rules, "--no-watch", "--admin-token", GOOD], { RATEKEEPER_ADMIN_TOKEN: "" });
    running.push(argv);
    expect(await adminStatus(argv, GOOD)).toBe(200);
    expect(argv.lines.some((l) => l.includes("--admin-token") && l.includes("--admin-token-file"))).toBe(true);
  });

  it("a token no Authorization header can carry (a space, a newline, non-ASCII) is refused at start, naming its source", () => {
    // `Bearer <token>` carries one run of visible ASCII: with such a token every request was a 401.
    expect(() => chooseAdminToken({ "admin-token": `${GOOD} more words` }, {})).toThrow(/^--admin-token: .*U\+0020 at index 32/);
    expect(() => chooseAdminToken({}, { RATEKEEPER_ADMIN_TOKEN: `${GOOD}\n` })).toThrow(/^RATEKEEPER_ADMIN_TOKEN: .*U\+000A/);
    expect(() => chooseAdminToken({ "admin-token": `${GOOD}\u00e9` }, {})).toThrow(/^--admin-token: .*U\+00E9/);
    expect(() => new TokenCheck(`${GOOD} x`)).toThrow(/^adminToken: /);
  });

  it("two sources at once is a usage error", () => {
    const file = path.join(dir, "both.token");
    writeFileSync(file, GOOD, { mode: 0o600 });
    expect(refusal(["--admin-token", GOOD, "--admin-token-file", file])).toMatch(/--admin-token.*--admin-token-file.*one of/);
  });
});
