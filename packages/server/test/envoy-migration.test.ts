/**
 * The migration of docs/migrating-from-envoy-ratelimit.md, as examples/envoy/ ships it:
 * `ratekeeper serve` started with nothing but the environment that examples/envoy/docker-compose.yaml
 * gives it (envoyproxy/ratelimit's own variables: RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, REDIS_URL
 * as host:port, USE_STATSD...), reading examples/envoy/ratelimit/config in envoyproxy/ratelimit's
 * format, sharing state in a Redis this test starts, and answering the descriptors
 * examples/envoy/envoy.yaml makes Envoy send (a gRPC client built from the official protos stands
 * in for Envoy, which is not installed here).
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parse } from "yaml";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { CLI, ROOT, rlsClient, startServiceProcess, type RlsClient, type ServiceProc } from "./support.js";

const EXAMPLE = path.join(ROOT, "examples/envoy");

/** The ratekeeper service's environment in docker-compose.yaml, as strings. */
function composeEnvironment(): Record<string, string> {
  const compose = parse(readFileSync(path.join(EXAMPLE, "docker-compose.yaml"), "utf8")) as {
    services: { ratekeeper: { environment: Record<string, string>; volumes: string[] } };
  };
  const svc = compose.services.ratekeeper;
  // The compose file mounts ./ratelimit at RUNTIME_ROOT/ratelimit: here RUNTIME_ROOT is the example's folder.
  expect(svc.volumes).toContain("./ratelimit:/data/ratelimit:ro");
  expect(svc.environment.RUNTIME_ROOT).toBe("/data");
  return Object.fromEntries(Object.entries(svc.environment).map(([k, v]) => [k, String(v)]));
}

it("the example's config directory passes `ratekeeper config check` unchanged", () => {
  const r = spawnSync(process.execPath, [CLI, "config", "check", path.join(EXAMPLE, "ratelimit/config")], { encoding: "utf8" });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
});

describeRedis("examples/envoy: ratekeeper in the place of envoyproxy/ratelimit, with its environment", () => {
  let redis: RedisHandle;
  let svc: ServiceProc;
  let rls: RlsClient;
  beforeAll(async () => {
    redis = await startRedis();
    const env = { ...composeEnvironment(), RUNTIME_ROOT: EXAMPLE, REDIS_URL: `127.0.0.1:${redis.port}` };
    svc = await startServiceProcess([], env);
    rls = rlsClient(svc.grpcPort);
  });
  afterAll(async () => {
    rls?.close();
    await svc?.stop();
    await redis?.stop();
  });

  const client = (ip: string) => ({
    entries: [
      { key: "destination_cluster", value: "app" },
      { key: "remote_address", value: ip },
    ],
  });

  it("says at start what it did with each of envoyproxy/ratelimit's variables", () => {
    for (const name of Object.keys(composeEnvironment()).filter((k) => k !== "LOG_LEVEL")) {
      expect(
        svc.lines.some((l) => l.includes(`"variable":"${name}"`)),
        name,
      ).toBe(true);
    }
  });

  it("answers Envoy's descriptors with the limits of the config directory", async () => {
    const r = await rls.shouldRateLimit({
      domain: "envoy",
      descriptors: [
        { entries: [{ key: "generic_key", value: "default" }] },
        client("10.0.0.1"),
        { entries: [{ key: "plan", value: "free" }] },
      ],
    });
    expect(r.overall_code).toBe("OK");
    const limits = r.statuses.map((s: { current_limit: { name: string; requests_per_unit: number; unit: string } }) => s.current_limit);
    expect(limits).toEqual([
      { name: "global", requests_per_unit: 500, unit: "SECOND" },
      { name: "per-client", requests_per_unit: 1000, unit: "HOUR" },
      { name: "", requests_per_unit: 60, unit: "MINUTE" },
    ]);
  });

  it("limits each client to 1000 an hour, in the Redis of REDIS_URL", async () => {
    const first = await rls.shouldRateLimit({ domain: "envoy", descriptors: [client("10.0.0.2")], hits_addend: 1000 });
    expect(first.overall_code).toBe("OK");
    expect(first.statuses[0].limit_remaining).toBe(0);
    const over = await rls.shouldRateLimit({ domain: "envoy", descriptors: [client("10.0.0.2")] });
    expect(over.overall_code).toBe("OVER_LIMIT");
    const other = await rls.shouldRateLimit({ domain: "envoy", descriptors: [client("10.0.0.3")] });
    expect(other.overall_code).toBe("OK");
    const admin = new Redis(redis.port, redis.host);
    try {
      expect(await admin.dbsize()).toBeGreaterThan(0);
    } finally {
      admin.disconnect();
    }
  });

  it("the shadow_mode limit counts but never denies", async () => {
    let last;
    for (let i = 0; i < 61; i++)
      last = await rls.shouldRateLimit({ domain: "envoy", descriptors: [{ entries: [{ key: "plan", value: "free" }] }] });
    expect(last.overall_code).toBe("OK");
    expect(last.statuses[0].code).toBe("OK");
    expect(last.statuses[0].current_limit.requests_per_unit).toBe(60); // the rule matched: it counted
    expect(last.statuses[0].limit_remaining).toBe(0);
  });
});
