/**
 * envoyproxy/ratelimit's global shadow mode (its SHADOW_MODE, src/service/ratelimit.go): a request
 * over a limit is answered with overall_code OK (so Envoy lets it through), while each
 * descriptor's status still says OVER_LIMIT, and it is still counted; over gRPC (official protos)
 * and /json (200, not 429).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { envoyEnvironment } from "../src/cli/envoy-env.js";
import { serveRules, type InProcessService } from "./in-process.js";
import { rlsClient, type RlsClient } from "./support.js";

let svc: InProcessService;
let rls: RlsClient;

beforeAll(async () => {
  svc = await serveRules("domain: g\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: 1 }\n", {
    globalShadowMode: true,
  });
  rls = rlsClient(svc.grpcPort);
});

afterAll(async () => {
  rls?.close();
  await svc?.close();
});

const req = { domain: "g", descriptors: [{ entries: [{ key: "user", value: "a" }] }] };

describe("global shadow mode", () => {
  it("gRPC: overall OK over the limit; the descriptor's status says OVER_LIMIT", async () => {
    expect((await rls.shouldRateLimit(req)).overall_code).toBe("OK");
    const over = await rls.shouldRateLimit(req);
    expect(over.overall_code).toBe("OK");
    expect(over.statuses[0]).toMatchObject({ code: "OVER_LIMIT", limit_remaining: 0 });
  });

  it("/json: 200 with overallCode OK", async () => {
    // Its own key, charged twice here, so the test does not depend on the one above (nor on a
    // window ending between them: a day, aligned on UTC midnight).
    const own = { domain: "g", descriptors: [{ entries: [{ key: "user", value: "json" }] }] };
    const post = () => fetch(`http://127.0.0.1:${svc.httpPort}/json`, { method: "POST", body: JSON.stringify(own) });
    expect((await post()).status).toBe(200);
    const r = await post();
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ overallCode: "OK", statuses: [{ code: "OVER_LIMIT" }] });
  });

  it("SHADOW_MODE=true maps to --global-shadow-mode", () => {
    const e = envoyEnvironment({ SHADOW_MODE: "true" }, {});
    expect(e.flags["global-shadow-mode"]).toBe(true);
    expect(e.lines[0]).toMatchObject({ level: "info", variable: "SHADOW_MODE" });
    expect(envoyEnvironment({ SHADOW_MODE: "false" }, {}).flags["global-shadow-mode"]).toBeUndefined();
  });
});
