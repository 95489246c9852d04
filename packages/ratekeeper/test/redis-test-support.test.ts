/**
 * test-support/redis.ts itself: without redis-server on PATH, Redis tests skip loudly, except
 * under CI=true, where they must fail. Run in a child process with an empty PATH.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { describeRedis, startRedis } from "../../../test-support/redis.js";

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

describeRedis("startRedis", () => {
  it("does not take another redis-server's answers for its own (a port bound by someone else first)", async () => {
    const first = await startRedis();
    try {
      // Ours cannot bind the port, but the server already there answers PING: this must fail,
      // not hand back a server another test file owns (its command counts would be shared).
      await expect(startRedis({ port: first.port })).rejects.toThrow(/another redis-server/);
      // On a port it picked itself, it tries another one instead.
      const second = await startRedis();
      try {
        expect(second.port).not.toBe(first.port);
        expect(second.pid).not.toBe(first.pid);
      } finally {
        await second.stop();
      }
    } finally {
      await first.stop();
    }
  });
});
