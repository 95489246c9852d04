/**
 * Two service processes on one healthy Redis, every core saturated by busy loops, 500 concurrent
 * checks at each instance on one descriptor, with the default Redis options: exactly the limit is
 * admitted and no decision comes from a failure policy, over HTTP and over gRPC. A store that
 * timed out its own backlog (the time a check waits in a busy process) would let the failure
 * policy answer and admit more.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { saturateCpu, type CpuLoad } from "../../../test-support/cpu.js";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { postJson, rlsClient, startServiceProcess, type ServiceProc } from "./support.js";

const RULES = `
domains:
  - domain: hot
    descriptors:
      - key: http_tenant
        algorithm: fixed-window
        limit: 300
        window: 30d
      - key: grpc_tenant
        algorithm: gcra
        limit: 300
        window: 30d
        burst: 299
`;
const PER_INSTANCE = 500;
/** Reasons a status carries when the store did not decide it. */
const POLICY_REASONS = new Set(["store-error", "insurance", "degraded", "overloaded"]);

describeRedis("overload: two service instances, CPU saturated, 500 concurrent checks each", () => {
  let redis: RedisHandle;
  let dir: string;
  let a: ServiceProc;
  let b: ServiceProc;
  let load: CpuLoad;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(path.join(tmpdir(), "rk-overload-"));
    const rules = path.join(dir, "rules.yaml");
    writeFileSync(rules, RULES);
    const args = ["--config", rules, "--redis", redis.url, "--no-watch", "--no-dashboard"];
    [a, b] = await Promise.all([startServiceProcess(args), startServiceProcess(args)]);
    load = saturateCpu();
  });
  afterAll(async () => {
    await load?.stop();
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("HTTP: exactly the limit, every decision from Redis", async () => {
    const body = { domain: "hot", descriptors: [{ http_tenant: "acme" }] };
    const results = await Promise.all(
      [a, b].flatMap((s) => Array.from({ length: PER_INSTANCE }, () => postJson(`${s.base}/v1/check`, body))),
    );
    expect(results.filter((r) => r.status !== 200)).toEqual([]);
    const reasons = results.map((r) => r.json.statuses[0].reason as string | null).filter((x) => x !== null && POLICY_REASONS.has(x));
    expect(reasons).toEqual([]);
    expect(results.filter((r) => r.json.allowed).length).toBe(300);
  });

  it("gRPC: exactly the limit, every decision from Redis", async () => {
    const clients = [rlsClient(a.grpcPort), rlsClient(b.grpcPort)];
    try {
      const req = { domain: "hot", descriptors: [{ entries: [{ key: "grpc_tenant", value: "acme" }] }] };
      const results = await Promise.all(clients.flatMap((c) => Array.from({ length: PER_INSTANCE }, () => c.shouldRateLimit(req))));
      expect(results.filter((r) => r.overall_code === "OK").length).toBe(300);
    } finally {
      for (const c of clients) c.close();
    }
    // The instances' metrics: no decision by a failure policy or backpressure.
    for (const s of [a, b]) {
      const m = await (await fetch(`${s.base}/metrics`)).text();
      expect(m).not.toMatch(/ratekeeper_decision_reasons_total\{reason="(store-error|insurance|degraded|overloaded)"\} [1-9]/);
    }
  });
});
