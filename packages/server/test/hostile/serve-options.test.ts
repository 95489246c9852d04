/**
 * `startService`'s options, given by a program (not through the CLI's flags): each bad value is
 * refused before anything listens, with an error naming the option and what it takes. Before,
 * most were taken as given: `maxBodyBytes: NaN` read bodies of any size, `shutdownTimeoutMs` or
 * a timer past 2^31 - 1 ms fired after 1 ms (node's overflow), `redisFailure: "bogus"` and
 * unknown options (a misspelt one) passed silently.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import { startService, type ServeOptions } from "../../src/index.js";

// Absolute: the test does not depend on the directory vitest was started from.
const RULES = path.resolve(import.meta.dirname, "../../../../examples/rules.yaml");
const base: ServeOptions = { configFile: RULES, port: 0, grpcPort: 0, watch: false, dashboard: false, logger: createLogger("silent") };

describe("startService options", () => {
  const bad: Array<[string, unknown, RegExp]> = [
    ["configFile", "", /configFile/],
    ["port", 70_000, /port: .*0-65535|port: .*65535/],
    ["port", "8080", /port/],
    ["grpcPort", -1, /grpcPort/],
    ["reloadSettleMs", -5, /reloadSettleMs/],
    ["reloadSettleMs", Number.NaN, /reloadSettleMs/],
    ["reloadSettleMs", 1e12, /reloadSettleMs: .*2147483647/],
    ["shutdownTimeoutMs", 1e12, /shutdownTimeoutMs/],
    ["shutdownTimeoutMs", -1, /shutdownTimeoutMs/],
    ["requestTimeoutMs", 0, /requestTimeoutMs/],
    ["requestTimeoutMs", Number.NaN, /requestTimeoutMs/],
    ["maxBodyBytes", Number.NaN, /maxBodyBytes/],
    ["maxBodyBytes", -1, /maxBodyBytes/],
    ["maxBodyBytes", 1.5, /maxBodyBytes/],
    ["maxRulesBytes", Number.NaN, /maxRulesBytes/],
    ["redisTimeoutMs", -1, /redisTimeoutMs/],
    ["redisTimeoutMs", 1e12, /redisTimeoutMs/],
    ["grpcMaxConnectionAgeMs", 1e12, /grpcMaxConnectionAgeMs/],
    ["grpcMaxConnectionAgeMs", 0, /grpcMaxConnectionAgeMs/],
    ["grpcMaxConnectionAgeGraceMs", -1, /grpcMaxConnectionAgeGraceMs/],
    ["nearLimitRatio", 2, /nearLimitRatio/],
    ["nearLimitRatio", Number.NaN, /nearLimitRatio/],
    ["maxDetailedMetricKeys", -1, /maxDetailedMetricKeys/],
    ["memoryMaxBytes", "x", /memoryMaxBytes/],
    ["redisFailure", "bogus", /redisFailure: .*degraded/],
    ["headerStyles", ["bogus"], /headerStyles/],
    ["watch", "yes", /watch/],
    ["rlsHeaders", { kind: "envoy" }, /rlsHeaders/],
    ["adminToken", 42, /adminToken/],
    ["logger", {}, /logger/],
    ["reloadSettle", 2000, /reloadSettle: unknown option/],
  ];
  for (const [name, value, message] of bad) {
    it(`refuses ${name}: ${String(JSON.stringify(value) ?? value)}`, async () => {
      const started = startService({ ...base, [name]: value });
      await expect(started.then((s) => s.close().then(() => "started"))).rejects.toThrow(message);
    });
  }

  it("every problem at once, each named", async () => {
    const options = { ...base, port: -1, nearLimitRatio: 7 } as ServeOptions;
    await expect(startService(options)).rejects.toThrow(/port[\s\S]*nearLimitRatio/);
  });

  it("takes the edges of each range", async () => {
    const s = await startService({
      ...base,
      reloadSettleMs: 0,
      shutdownTimeoutMs: 2_147_483_647,
      requestTimeoutMs: 1,
      maxBodyBytes: 1,
      redisTimeoutMs: 0,
      grpcMaxConnectionAgeMs: 2_147_483_647,
      grpcMaxConnectionAgeGraceMs: 0,
      nearLimitRatio: 1,
      maxDetailedMetricKeys: 0,
      headerStyles: [],
      redisFailure: "closed",
      rlsHeaders: { kind: "none" },
      host: "127.0.0.1",
    }).catch((e: unknown) => e as Error);
    if (s instanceof Error) throw s;
    await s.close();
  });
});
