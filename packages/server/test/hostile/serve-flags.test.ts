/**
 * The serve command's numeric flags take decimal digits only (`0x10` is not 16, `1e3` not 1000),
 * and the bounds the hostile suite relies on are settable: the rules file size at start, empty
 * rules on purpose, the memory store's byte bound (shown in /metrics).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { until } from "../../../../test-support/process.js";
import { CLI, startServiceProcess, type ServiceProc } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-hostile-flags-"));
const rules = path.join(dir, "rules.yaml");
const RULES = "domains:\n  - domain: d\n    descriptors:\n      - key: k\n        algorithm: gcra\n        limit: 5\n        window: 1s\n";
writeFileSync(rules, RULES);
const running: ServiceProc[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function serve(args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, "serve", "--config", rules, "--port", "0", "--grpc-port", "0", "--no-watch", ...args], {
    encoding: "utf8",
    env: { ...process.env, RATEKEEPER_ADMIN_TOKEN: "" },
    // A flag wrongly accepted starts the service, which runs until this kills it.
    timeout: 30_000,
  });
  return { status: r.status, stderr: r.stderr };
}

describe("serve flags", () => {
  for (const [flag, bad] of [
    ["--max-body", "0x10"],
    ["--request-timeout", "1e3"],
    ["--max-rules-bytes", "4MB"],
    ["--memory-max-bytes", "12kB"],
    ["--port", "0x50"],
    ["--near-limit-ratio", "1.5"],
    ["--near-limit-ratio", "80%"],
    ["--max-detailed-metric-keys", "1e3"],
    ["--rls-headers", "fancy"],
    // Timers past 2^31 - 1 ms fire after 1 ms in node: refused, not run at once.
    ["--reload-settle", "99999999999"],
    ["--grpc-max-connection-age", "2147483648"],
    ["--grpc-max-connection-age-grace", "2147483648"],
    ["--redis-timeout", "2147483648"],
    ["--request-timeout", "2147483648"],
  ] as const) {
    it(`${flag} ${bad} is a usage error naming the flag`, () => {
      const r = serve([flag, bad]);
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(`${flag}: must be`);
    });
  }

  it("envoyproxy/ratelimit's variables with values that cannot be used are usage errors naming them", () => {
    for (const [name, value] of [
      ["PORT", "http"],
      ["NEAR_LIMIT_RATIO", "high"],
      ["REDIS_TIMEOUT", "10"],
    ]) {
      const r = spawnSync(process.execPath, [CLI, "serve", "--config", rules, "--no-watch"], {
        encoding: "utf8",
        env: { ...process.env, RATEKEEPER_ADMIN_TOKEN: "", [name as string]: value },
        timeout: 30_000,
      });
      expect(r.status, name).toBe(2);
      expect(r.stderr).toContain(`${name}: must be`);
    }
  });

  it("--rls-header-names needs --rls-headers envoy, and three header names", () => {
    expect(serve(["--rls-header-names", "A,B,C"]).stderr).toMatch(/--rls-header-names: only with --rls-headers envoy/);
    const r = serve(["--rls-headers", "envoy", "--rls-header-names", "A,B"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--rls-header-names: must be three header names/);
  });

  it("--memory-max-bytes below 4096 is a usage error", () => {
    const r = serve(["--memory-max-bytes", "100"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--memory-max-bytes: .*4096/);
  });

  it("--max-rules-bytes refuses a larger rules file at start, naming the flag", () => {
    const r = serve(["--max-rules-bytes", "50"]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/over the 50-byte limit \(raise it with --max-rules-bytes\)/);
  });

  it("--memory-max-bytes is the bound /metrics shows", async () => {
    const svc = await startServiceProcess(["--config", rules, "--no-watch", "--memory-max-bytes", "8388608"]);
    running.push(svc);
    const text = await (await fetch(`${svc.base}/metrics`)).text();
    expect(text).toMatch(/^ratekeeper_memory_store_max_bytes 8388608$/m);
  });

  it("--allow-empty-rules lets a reload to no rules apply (with --reload-settle)", async () => {
    const file = path.join(dir, "empty-ok.yaml");
    writeFileSync(file, RULES);
    const svc = await startServiceProcess(["--config", file, "--allow-empty-rules", "--reload-settle", "200"]);
    running.push(svc);
    writeFileSync(file, "domains: []\n");
    await until(() => svc.lines.some((l) => l.includes('"msg":"rules reloaded"')), "the empty rules to apply", 600);
    const r = (await (await fetch(`${svc.base}/v1/rules`)).json()) as { rules: unknown[] };
    expect(r.rules).toEqual([]);
  });
});

describe("serve: a bad flag is refused before anything is printed", () => {
  for (const [flags, message] of [
    [["--port", "0x10"], "--port: must be"],
    [["--overrides", "ftp://db"], "--overrides: must be a sqlite: or postgres:// URL"],
    [["--admin-token", "x"], "admin"],
  ] as const) {
    it(`no --config with ${flags.join(" ")}: the usage error alone, no warning about the default rules first`, () => {
      const r = spawnSync(process.execPath, [CLI, "serve", ...flags, "--grpc-port", "0"], {
        encoding: "utf8",
        env: { ...process.env, RATEKEEPER_ADMIN_TOKEN: "", RATEKEEPER_OVERRIDES: "", PORT: "0" },
        timeout: 30_000,
      });
      expect(r.status).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr.trim().split("\n")).toEqual([expect.stringContaining(message)]);
    });
  }
});
