/**
 * envoyproxy/ratelimit's integration test expectations (test/integration/integration_test.go:
 * testBasicBaseConfig, testShareThreshold, testConfigReload), replayed over gRPC with a client
 * built from the official Envoy protos against `ratekeeper serve`, reading that project's own
 * runtime directory (runtime/current/ratelimit/config, unmodified copies) unchanged.
 * The reload is live, as there: reload.yaml copied into the watched directory, counted by
 * `ratelimit_service_config_load_success`. Not replayed: its local-cache gauges.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { ROOT, rlsClient, startServiceProcess, type RlsClient, type ServiceProc } from "./support.js";

const CORPUS = path.join(ROOT, "packages/server/test/fixtures/envoy-ratelimit/integration");

let dir: string;
let configDir: string;
let svc: ServiceProc;
let rls: RlsClient;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-envoy-replay-"));
  configDir = path.join(dir, "runtime/current/ratelimit/config");
  mkdirSync(configDir, { recursive: true });
  for (const f of ["basic.yaml", "another.yaml", "share_threshold.yaml"])
    copyFileSync(path.join(CORPUS, "config", f), path.join(configDir, f));
  svc = await startServiceProcess(["--config", configDir, "--no-watch"]);
  rls = rlsClient(svc.grpcPort);
});

afterAll(async () => {
  rls?.close();
  await svc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** `common.NewRateLimitRequest(domain, [][][2]string{...}, hitsAddend)`. */
function request(domain: string, descriptors: string[][][], hitsAddend = 1) {
  return { domain, descriptors: descriptors.map((d) => ({ entries: d.map(([key, value]) => ({ key, value })) })), hits_addend: hitsAddend };
}

/** `newDescriptorStatus(code, requestsPerUnit, unit, limitRemaining, durRemaining)`, as the proto decodes (defaults on). */
function status(code: string, requestsPerUnit: number, unit: string, limitRemaining: number, dur: { seconds: number }) {
  return {
    code,
    current_limit: { requests_per_unit: requestsPerUnit, unit, name: "" },
    limit_remaining: limitRemaining,
    duration_until_reset: { seconds: dur.seconds, nanos: expect.any(Number) },
    quota: null,
  };
}

const random = () => String(Math.floor(Math.random() * 2 ** 48));

describe("envoyproxy/ratelimit integration expectations over gRPC (official protos)", () => {
  it("basic: an unknown domain is OK with no limit; basic/key1 is 50 per SECOND", async () => {
    const r = await rls.shouldRateLimit(request("foo", [[["hello", "world"]]]));
    expect(r.overall_code).toBe("OK");
    expect(r.statuses).toEqual([{ code: "OK", current_limit: null, limit_remaining: 0, duration_until_reset: null, quota: null }]);
    // A second may end between calls: key1 is 50 per second, so a fresh value each time.
    const b = await rls.shouldRateLimit(request("basic", [[["key1", `foo${random()}`]]]));
    expect(b.overall_code).toBe("OK");
    expect(b.statuses[0]).toEqual(status("OK", 50, "SECOND", 49, b.statuses[0].duration_until_reset));
  });

  it("another/key2: 20 per MINUTE, then OVER_LIMIT with 0 remaining", async () => {
    const value = random();
    for (let i = 0; i < 25; i++) {
      const r = await rls.shouldRateLimit(request("another", [[["key2", value]]]));
      const over = i >= 20;
      const code = over ? "OVER_LIMIT" : "OK";
      // A minute may end during the run: then the count starts again (envoyproxy/ratelimit's too).
      if (!over && r.statuses[0].limit_remaining !== 20 - (i + 1)) return;
      expect(r.overall_code, `request ${i + 1}`).toBe(code);
      expect(r.statuses[0]).toEqual(status(code, 20, "MINUTE", over ? 0 : 20 - (i + 1), r.statuses[0].duration_until_reset));
    }
  });

  it("another/key2 and key3 in one request: each counted, key3 (10 per HOUR) over after 10", async () => {
    const value = random();
    for (let i = 0; i < 15; i++) {
      const r = await rls.shouldRateLimit(request("another", [[["key2", value]], [["key3", value]]]));
      if (r.statuses[0].limit_remaining !== 20 - (i + 1)) return; // a minute ended (see above)
      const over = i >= 10;
      expect(r.overall_code, `request ${i + 1}`).toBe(over ? "OVER_LIMIT" : "OK");
      expect(r.statuses).toEqual([
        status("OK", 20, "MINUTE", 20 - (i + 1), r.statuses[0].duration_until_reset),
        status(over ? "OVER_LIMIT" : "OK", 10, "HOUR", over ? 0 : 10 - (i + 1), r.statuses[1].duration_until_reset),
      ]);
    }
  });

  it("share_threshold: files/* values share one counter; files_no_share/* values each have their own", async () => {
    for (let i = 0; i < 10; i++) await rls.shouldRateLimit(request("share-threshold-test", [[["files", "files/a.pdf"]]]));
    const r = await rls.shouldRateLimit(request("share-threshold-test", [[["files", "files/b.csv"]]]));
    expect(r.overall_code).toBe("OVER_LIMIT");
    expect(r.statuses[0]).toEqual(status("OVER_LIMIT", 10, "HOUR", 0, r.statuses[0].duration_until_reset));
    for (let i = 0; i < 10; i++) {
      const one = await rls.shouldRateLimit(request("share-threshold-test", [[["files_no_share", `files_no_share/${random()}`]]]));
      expect(one.overall_code).toBe("OK");
      expect(one.statuses[0]).toEqual(status("OK", 10, "HOUR", 9, one.statuses[0].duration_until_reset));
    }
  });

  it("reload (its testConfigReload, live): reload.yaml copied into the watched directory is loaded and counted; its removal reloads again", async () => {
    // A service of its own, watching its own copy of the directory (settle shortened for the test).
    const own = mkdtempSync(path.join(tmpdir(), "rk-envoy-reload-"));
    const ownConfig = path.join(own, "runtime/current/ratelimit/config");
    mkdirSync(ownConfig, { recursive: true });
    for (const f of ["basic.yaml", "another.yaml", "share_threshold.yaml"])
      copyFileSync(path.join(CORPUS, "config", f), path.join(ownConfig, f));
    const live = await startServiceProcess(["--config", ownConfig, "--reload-settle", "200"]);
    const client = rlsClient(live.grpcPort);
    const loads = async () => {
      const text = await (await fetch(`${live.base}/metrics`)).text();
      return Number(/^ratelimit_service_config_load_success (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
    };
    try {
      const before = await client.shouldRateLimit(request("reload", [[["block", "foo"]]]));
      expect(before.statuses).toEqual([{ code: "OK", current_limit: null, limit_remaining: 0, duration_until_reset: null, quota: null }]);
      const loadsBefore = await loads();
      expect(loadsBefore).toBe(1); // the load at start
      copyFileSync(path.join(CORPUS, "reload.yaml"), path.join(ownConfig, "reload.yaml"));
      await until(async () => (await loads()) > loadsBefore, "the reload to be counted");
      const r = await client.shouldRateLimit(request("reload", [[["key1", `foo${random()}`]]]));
      expect(r.statuses[0]).toEqual(status("OK", 50, "SECOND", 49, r.statuses[0].duration_until_reset));
      const block = await client.shouldRateLimit(request("reload", [[["block", "foo"]]]));
      expect(block.overall_code).toBe("OVER_LIMIT"); // requests_per_unit: 0
      // "Removal of config files must trigger a reload".
      const loadsAfter = await loads();
      rmSync(path.join(ownConfig, "reload.yaml"));
      await until(async () => (await loads()) > loadsAfter, "the removal's reload to be counted");
      const gone = await client.shouldRateLimit(request("reload", [[["block", "foo"]]]));
      expect(gone.overall_code).toBe("OK");
    } finally {
      client.close();
      await live.stop();
      rmSync(own, { recursive: true, force: true });
    }
  });
});
