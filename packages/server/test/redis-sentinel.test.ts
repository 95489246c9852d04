/**
 * The service on a Redis that Sentinel manages: a master, its replica and one sentinel; two
 * `ratekeeper serve` instances, one configured as envoyproxy/ratelimit is (REDIS_TYPE=sentinel,
 * REDIS_URL=<master name>,<sentinel>), one with our flags. Exactly the limit across both; the
 * master killed (kill -9): every check is still answered (by the degraded policy until the
 * sentinel promotes the replica), then both follow the new master and are exact again, with the
 * counts the replica had. The master killed (kill -9), and frozen (SIGSTOP: silent, its connection open).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { underLoad } from "../../../test-support/cpu.js";
import { until } from "../../../test-support/process.js";
import { describeRedis, rawCommand } from "../../../test-support/redis.js";
import { startRedisSentinel, type RedisSentinelHandle } from "../../../test-support/redis-sentinel.js";
import { postJson, startServiceProcess, type ServiceProc } from "./support.js";

const RULES = `
domains:
  - domain: s
    descriptors:
      - key: user
        algorithm: sliding-log
        limit: 10
        window: 1h
`;

// kill -9: the connection closes and the client asks the sentinels again. SIGSTOP: the master is
// silent with its connection open; the service drops the connection when its breaker opens.
// SENTINEL FAILOVER: the planned switch of an upgrade; the old master becomes a replica.
for (const fault of ["kill -9", "SIGSTOP", "SENTINEL FAILOVER"] as const)
  describeRedis(`the service on Redis Sentinel, through a failover (master ${fault})`, () => {
    let sentinel: RedisSentinelHandle;
    let dir: string;
    let envoyStyle: ServiceProc;
    let flagStyle: ServiceProc;

    beforeAll(async () => {
      sentinel = await startRedisSentinel({ downAfterMs: 1000 });
      dir = mkdtempSync(path.join(tmpdir(), "rk-sentinel-"));
      const rules = path.join(dir, "rules.yaml");
      writeFileSync(rules, RULES);
      const s = `${sentinel.sentinel.host}:${sentinel.sentinel.port}`;
      const args = ["--config", rules, "--no-watch"];
      [envoyStyle, flagStyle] = await Promise.all([
        startServiceProcess(args, { REDIS_TYPE: "sentinel", REDIS_URL: `${sentinel.masterName},${s}` }),
        startServiceProcess([
          ...args,
          "--redis-type",
          "sentinel",
          "--redis",
          `redis://${s}`,
          "--redis-sentinel-master",
          sentinel.masterName,
        ]),
      ]);
    });

    afterAll(async () => {
      sentinel?.master.resume();
      await Promise.all([envoyStyle?.stop(), flagStyle?.stop()]);
      await sentinel?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const check = (svc: ServiceProc, user: string) => postJson(`${svc.base}/v1/check`, { domain: "s", descriptors: [{ user }] });

    /** 15 concurrent checks of `user`, alternating between the instances, every core busy; how many were admitted, and their reasons. */
    async function burst(user: string): Promise<{ admitted: number; reasons: string[] }> {
      const rs = await underLoad(() => Promise.all(Array.from({ length: 15 }, (_, i) => check(i % 2 ? envoyStyle : flagStyle, user))));
      for (const r of rs) expect(r.status).toBe(200);
      return {
        admitted: rs.filter((r) => r.json.allowed).length,
        reasons: [...new Set(rs.map((r) => String(r.json.statuses[0].reason)))].sort(),
      };
    }

    it("exactly the limit across both; the master gone: answered throughout, then the new master, exact again", async () => {
      expect(envoyStyle.lines.join("\n")).toContain(
        `"redis":"sentinel ${sentinel.sentinel.host}:${sentinel.sentinel.port} (master rkmaster)"`,
      );
      expect(await burst("u1")).toEqual({ admitted: 10, reasons: ["limit", "null"] });

      if (fault === "kill -9") await sentinel.master.kill9();
      else if (fault === "SIGSTOP") sentinel.master.pause();
      else expect(await rawCommand(sentinel.sentinel.port, ["SENTINEL", "FAILOVER", sentinel.masterName])).toBe("+OK\r\n");
      const t0 = Date.now();
      const during: { status: number; reason: string | null }[] = [];
      let promotedMs = -1;
      // Checks every 50 ms until the sentinel has promoted the replica and both instances are ready again.
      for (;;) {
        for (const svc of [envoyStyle, flagStyle]) {
          const r = await check(svc, `d${during.length}`);
          during.push({ status: r.status, reason: r.json.statuses[0].reason });
        }
        if (promotedMs < 0 && (await sentinel.currentMasterPort()) === sentinel.replica.port) promotedMs = Date.now() - t0;
        const ready = await Promise.all([envoyStyle, flagStyle].map(async (s) => (await fetch(`${s.base}/readyz`)).status === 200));
        if (promotedMs >= 0 && ready.every(Boolean)) break;
        expect(Date.now() - t0, `within 20 s: promoted at ${promotedMs} ms; ready ${JSON.stringify(ready)}`).toBeLessThan(20_000);
        await new Promise((r) => setTimeout(r, 50));
      }
      const readyMs = Date.now() - t0;
      const degraded = during.filter((d) => d.reason === "degraded").length;
      console.log(
        `sentinel failover (${fault}): replica promoted ${promotedMs} ms after the ${fault}, both instances ready at ${readyMs} ms; ${during.length} checks meanwhile, ${degraded} degraded`,
      );
      for (const d of during) expect(d.status).toBe(200);
      // A planned failover may be over between two checks.
      if (fault !== "SENTINEL FAILOVER") expect(degraded).toBeGreaterThan(0);

      // Redis decides again, on the new master: u1's count was replicated before the kill.
      await until(async () => (await check(envoyStyle, "probe")).json.statuses[0].reason === null, "Redis to decide again", 100, 50);
      for (const svc of [envoyStyle, flagStyle]) {
        const r = await check(svc, "u1");
        expect([r.json.allowed, r.json.statuses[0].reason]).toEqual([false, "limit"]);
      }
      expect(await burst("u2")).toEqual({ admitted: 10, reasons: ["limit", "null"] });
    });
  });
