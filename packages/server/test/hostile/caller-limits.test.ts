/**
 * Limits sent with descriptors (Envoy's `RateLimitDescriptor.limit`, from a route's config) are
 * each decided by a limiter of their own, and a limiter holds memory for the process's life (its
 * policy, and a memory store table). A proxy sends the few limits its config names; a caller
 * sending a new `requests_per_unit` with every request (it is a uint32) made the service hold one
 * more limiter per request: ~2.4 KB each, outside the memory store's byte bound, until the process
 * ran out of memory. The distinct limits are now capped, and one past the cap is refused naming
 * the field and the cap, while the limits seen before the cap keep working.
 */
import { MemoryStore } from "ratekeeper";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_CALLER_LIMITS } from "../../src/service/request-caps.js";
import { LimiterCache } from "../../src/service/limiters.js";
import { serveRules, type InProcessService } from "../in-process.js";
import { rlsClient, type RlsClient } from "../support.js";

describe("distinct limits sent with descriptors are capped", () => {
  it("LimiterCache: the cap's worth are taken, the next is refused naming the field and the cap, the known ones still answer", () => {
    const cache = new LimiterCache(new MemoryStore({ sweepIntervalMs: 0 }), undefined);
    for (let rpu = 1; rpu <= MAX_CALLER_LIMITS; rpu++) cache.callerPolicy({ requestsPerUnit: rpu, unitMs: 60_000 });
    expect(() => cache.callerPolicy({ requestsPerUnit: MAX_CALLER_LIMITS + 1, unitMs: 60_000 })).toThrow(
      new RegExp(`limit\\.requests_per_unit: more than ${MAX_CALLER_LIMITS} distinct limits`),
    );
    expect(() => cache.callerPolicy({ requestsPerUnit: 1, unitMs: 1000 })).toThrow(/distinct limits/);
    // Known ones: the same policy object as before.
    const p = cache.callerPolicy({ requestsPerUnit: 7, unitMs: 60_000 });
    expect(p.policyId).toBe("caller:7:60000");
    expect(cache.callerPolicy({ requestsPerUnit: 7, unitMs: 60_000 })).toBe(p);
  });
});

describe("over gRPC ShouldRateLimit", () => {
  let svc: InProcessService;
  let rls: RlsClient;
  beforeAll(async () => {
    svc = await serveRules("domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n");
    rls = rlsClient(svc.grpcPort);
  });
  afterAll(async () => {
    rls?.close();
    await svc?.close();
  });

  it("a caller cycling requests_per_unit gets INVALID_ARGUMENT past the cap; a route's own limit keeps working", async () => {
    const INVALID_ARGUMENT = 3;
    const perCall = 64;
    let rpu = 1;
    while (rpu <= MAX_CALLER_LIMITS) {
      const descriptors = [];
      for (let i = 0; i < perCall && rpu <= MAX_CALLER_LIMITS; i++, rpu++) {
        descriptors.push({ entries: [{ key: "user", value: "u" }], limit: { requests_per_unit: rpu, unit: "HOUR" } });
      }
      const r = (await rls.shouldRateLimit({ domain: "d", descriptors })) as { overall_code: string };
      expect(r.overall_code).toBe("OK");
    }
    let error: { code: number; details: string } | undefined;
    try {
      await rls.shouldRateLimit({
        domain: "d",
        descriptors: [{ entries: [{ key: "user", value: "u" }], limit: { requests_per_unit: rpu, unit: "HOUR" } }],
      });
    } catch (e) {
      error = e as { code: number; details: string };
    }
    expect(error?.code).toBe(INVALID_ARGUMENT);
    expect(error?.details).toMatch(/requests_per_unit: more than \d+ distinct limits/);
    // A limit seen before, and a descriptor the rules decide, still answer.
    const known = (await rls.shouldRateLimit({
      domain: "d",
      descriptors: [{ entries: [{ key: "user", value: "v" }], limit: { requests_per_unit: 3, unit: "HOUR" } }],
    })) as { overall_code: string };
    expect(known.overall_code).toBe("OK");
    const ruled = (await rls.shouldRateLimit({ domain: "d", descriptors: [{ entries: [{ key: "user", value: "w" }] }] })) as {
      overall_code: string;
    };
    expect(ruled.overall_code).toBe("OK");
  }, 60_000);
});
