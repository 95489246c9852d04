/**
 * test-support/redis.ts itself: without redis-server on PATH, Redis tests skip loudly, except
 * under CI=true, where they must fail. Run in a child process with an empty PATH.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const HELPER = fileURLToPath(new URL("../../../test-support/redis.ts", import.meta.url));

function modeWithoutRedis(ci: boolean) {
  const code = `import(${JSON.stringify(HELPER)}).then((m) => console.log("mode=" + m.redisTestMode()))`;
  return spawnSync(process.execPath, ["--import", "tsx", "-e", code], {
    encoding: "utf8",
    env: { ...process.env, PATH: "/nonexistent", CI: ci ? "true" : "" },
    timeout: 60_000,
  });
}

describe("redisTestMode without redis-server", () => {
  it("skips with a loud warning when not under CI", () => {
    const r = modeWithoutRedis(false);
    expect(r.stdout).toContain("mode=skip");
    expect(r.stderr).toContain("SKIPPING Redis tests: redis-server not found");
  });

  it("fails under CI=true", () => {
    const r = modeWithoutRedis(true);
    expect(r.status).not.toBe(0);
    expect(r.stdout).not.toContain("mode=");
    expect(r.stderr).toContain("redis-server not found on PATH, and CI=true");
  });
});

describe("freePort", () => {
  it("hands out distinct ports below the ephemeral range (no client socket can take one before the server binds)", async () => {
    const { freePort } = await import("../../../test-support/process.js");
    const ports = await Promise.all(Array.from({ length: 50 }, () => freePort()));
    expect(new Set(ports).size).toBe(50);
    for (const p of ports) {
      expect(p).toBeGreaterThanOrEqual(15_000);
      expect(p + 10_000).toBeLessThan(32_768); // a cluster node's bus port too
    }
  });
});
