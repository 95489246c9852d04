/**
 * What an operator reads in the service's log while Redis is away: one warning when the store's
 * breaker opens, a reminder every 10 s while it stays open (not a line for every probe, which
 * comes every 100-500 ms), and one line when Redis answers again, with how long it was away.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { freePort, until } from "../../../test-support/process.js";
import { startServiceProcess, type ServiceProc } from "./support.js";

describeRedis("the service's log while Redis is away", () => {
  let port: number;
  let svc: ServiceProc;
  let redis: RedisHandle | undefined;
  beforeAll(async () => {
    port = await freePort(); // nothing listens there yet
    svc = await startServiceProcess(["--redis", `redis://127.0.0.1:${port}`]);
  });
  afterAll(async () => {
    await svc?.stop();
    await redis?.stop();
  });

  const lines = (msg: string) => svc.lines.filter((l) => l.includes(`"msg":"${msg}`));

  it("one warning when the breaker opens, none per probe", async () => {
    await until(() => lines("redis store breaker").length > 0, "the breaker to open", 100, 50);
    await new Promise((r) => setTimeout(r, 2500)); // 5-25 probes
    const opened = lines("redis store breaker");
    expect(opened).toHaveLength(1);
    expect(JSON.parse(opened[0] as string)).toMatchObject({ level: 40, to: "open", failure: "degraded" });
  });

  it("one line when Redis answers again, saying how long it was away", async () => {
    redis = await startRedis({ port });
    await until(() => lines("redis answers again").length > 0, "the breaker to close", 100, 50);
    const back = JSON.parse(lines("redis answers again")[0] as string) as { level: number; outageMs: number; probes: number };
    expect(back.level).toBe(30);
    expect(back.outageMs).toBeGreaterThan(2500);
    expect(back.probes).toBeGreaterThan(1);
    expect(lines("redis store breaker")).toHaveLength(1);
  });
});
