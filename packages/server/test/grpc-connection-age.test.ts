/**
 * envoyproxy/ratelimit's GRPC_MAX_CONNECTION_AGE and GRPC_MAX_CONNECTION_AGE_GRACE: the gRPC
 * server closes a connection (GOAWAY) once it is that old, so clients reconnect and spread over
 * the instances behind a load balancer.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { envoyEnvironment } from "../src/cli/envoy-env.js";
import { createLogger } from "../src/log.js";
import { startService, type RunningService } from "../src/server.js";
import { PROTO_DIR } from "./support.js";

let dir: string;
let svc: RunningService;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-conn-age-"));
  writeFileSync(
    path.join(dir, "a.yaml"),
    "domain: a\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n",
  );
  svc = await startService({
    configFile: path.join(dir, "a.yaml"),
    port: 0,
    grpcPort: 0,
    host: "127.0.0.1",
    watch: false,
    dashboard: false,
    grpcMaxConnectionAgeMs: 300,
    grpcMaxConnectionAgeGraceMs: 100,
    logger: createLogger("silent"),
  });
});

afterAll(async () => {
  await svc?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("gRPC connection age", () => {
  it("a connection is closed once older than the age: the client's channel goes idle, then reconnects for the next call", async () => {
    const def = protoLoader.loadSync("envoy/service/ratelimit/v3/rls.proto", { includeDirs: [PROTO_DIR], keepCase: true, enums: String });
    const Client = (grpc.loadPackageDefinition(def) as any).envoy.service.ratelimit.v3.RateLimitService as grpc.ServiceClientConstructor;
    const c = new Client(`127.0.0.1:${svc.grpcPort}`, grpc.credentials.createInsecure()) as any;
    const call = () =>
      new Promise<any>((resolve, reject) =>
        c.ShouldRateLimit({ domain: "a", descriptors: [{ entries: [{ key: "user", value: "x" }] }] }, (e: Error | null, r: unknown) =>
          e ? reject(e) : resolve(r),
        ),
      );
    try {
      expect((await call()).overall_code).toBe("OK");
      expect(c.getChannel().getConnectivityState(false)).toBe(grpc.connectivityState.READY);
      await until(() => c.getChannel().getConnectivityState(false) !== grpc.connectivityState.READY, "the connection to be closed", 60, 50);
      expect((await call()).overall_code).toBe("OK");
    } finally {
      c.close();
    }
  });

  it("GRPC_MAX_CONNECTION_AGE and its grace, Go durations, map to the flags", () => {
    expect(envoyEnvironment({ GRPC_MAX_CONNECTION_AGE: "24h", GRPC_MAX_CONNECTION_AGE_GRACE: "1h" }, {}).flags).toEqual({
      "grpc-max-connection-age": "86400000",
      "grpc-max-connection-age-grace": "3600000",
    });
  });
});
