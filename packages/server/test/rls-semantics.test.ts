/**
 * Envoy's RLS v3 over gRPC with the official protos, answered as envoyproxy/ratelimit answers:
 * per-descriptor hits_addend (0: check only), OVER_LIMIT for a cost above the limit, MaxUint32
 * remaining when unlimited, every unit of the proto's enum, empty entry values, its errors for
 * an empty domain or descriptor list; and grpc.health.v1 on the same port.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clearOfMinuteEdge, serveRules, type InProcessService } from "./in-process.js";
import { healthClient, rlsClient, type HealthClient, type RlsClient } from "./support.js";

const RULES = `
domains:
  - domain: t
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 5 }
      - key: vip
        unlimited: true
`;

let svc: InProcessService;
let rls: RlsClient;
let health: HealthClient;

beforeAll(async () => {
  await clearOfMinuteEdge(); // its counts are in minute windows aligned on the clock
  svc = await serveRules(RULES);
  rls = rlsClient(svc.grpcPort);
  health = healthClient(svc.grpcPort);
});

afterAll(async () => {
  rls?.close();
  health?.close();
  await svc?.close();
});

const user = (value: string, extra: object = {}) => ({ entries: [{ key: "user", value }], ...extra });

describe("RLS v3 semantics, as envoyproxy/ratelimit", () => {
  it("a descriptor's own hits_addend replaces the request's; 0 checks without charging", async () => {
    const peek = await rls.shouldRateLimit({ domain: "t", descriptors: [user("a", { hits_addend: { value: 0 } })], hits_addend: 4 });
    expect(peek.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 5 });
    const three = await rls.shouldRateLimit({ domain: "t", descriptors: [user("a", { hits_addend: { value: 3 } })], hits_addend: 1 });
    expect(three.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 2 });
    const both = await rls.shouldRateLimit({
      domain: "t",
      descriptors: [user("a"), user("b", { hits_addend: { value: 0 } })],
      hits_addend: 2,
    });
    expect(both.statuses.map((s: { limit_remaining: number }) => s.limit_remaining)).toEqual([0, 5]);
  });

  it("a cost above the limit is OVER_LIMIT with 0 remaining, and charges nothing", async () => {
    const r = await rls.shouldRateLimit({ domain: "t", descriptors: [user("big")], hits_addend: 6 });
    expect(r.overall_code).toBe("OVER_LIMIT");
    expect(r.statuses[0]).toMatchObject({
      code: "OVER_LIMIT",
      limit_remaining: 0,
      current_limit: { requests_per_unit: 5, unit: "MINUTE" },
    });
    const after = await rls.shouldRateLimit({ domain: "t", descriptors: [user("big")] });
    expect(after.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 4 });
  });

  it("unlimited: OK with 4294967295 remaining and no current_limit; no rule: OK with 0", async () => {
    const r = await rls.shouldRateLimit({
      domain: "t",
      descriptors: [{ entries: [{ key: "vip", value: "x" }] }, { entries: [{ key: "other", value: "x" }] }],
    });
    expect(r.statuses[0]).toEqual({
      code: "OK",
      limit_remaining: 4_294_967_295,
      current_limit: null,
      duration_until_reset: null,
      quota: null,
    });
    expect(r.statuses[1]).toMatchObject({ code: "OK", limit_remaining: 0, current_limit: null });
  });

  it("a rule from envoy's rate_limit block reports current_limit with its own (empty) name", async () => {
    const r = await rls.shouldRateLimit({ domain: "t", descriptors: [user("named")] });
    expect(r.statuses[0].current_limit).toEqual({ requests_per_unit: 5, unit: "MINUTE", name: "" });
    expect(Number(r.statuses[0].duration_until_reset.seconds)).toBeLessThanOrEqual(60);
  });

  it("descriptor limits in every unit of the enum, counted per clock-aligned unit", async () => {
    // envoy.type.v3.RateLimitUnit (the override's unit) has no WEEK; the response's Unit has.
    for (const unit of ["SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR"]) {
      // A window may end between two calls (a second does, now and then, on a busy machine):
      // then the run is repeated on a fresh key; it cannot happen twice in a row.
      let codes: string[] = [];
      let last: any;
      for (let attempt = 0; attempt < 3 && codes.join() !== "OK,OK,OVER_LIMIT"; attempt++) {
        const req = {
          domain: "t",
          descriptors: [{ entries: [{ key: "u", value: `${unit}${attempt}` }], limit: { requests_per_unit: 2, unit } }],
        };
        codes = [];
        for (let i = 0; i < 3; i++) codes.push((last = await rls.shouldRateLimit(req)).overall_code);
      }
      expect(codes, unit).toEqual(["OK", "OK", "OVER_LIMIT"]);
      expect(last.statuses[0].current_limit, unit).toEqual({ requests_per_unit: 2, unit, name: "" });
    }
  });

  it("a descriptor limit in a domain the config does not have limits nothing (GetLimit looks the domain up first)", async () => {
    const req = {
      domain: "nowhere",
      descriptors: [{ entries: [{ key: "u", value: "x" }], limit: { requests_per_unit: 0, unit: "HOUR" } }],
    };
    const r = await rls.shouldRateLimit(req);
    expect(r.overall_code).toBe("OK");
    expect(r.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 0 });
    expect(r.statuses[0].current_limit).toBeFalsy();
  });

  it("duration_until_reset is whole seconds to the end of the unit, as its CalculateReset (Envoy's X-RateLimit-Reset reads only the seconds)", async () => {
    const limit = { requests_per_unit: 5, unit: "SECOND" };
    const r = await rls.shouldRateLimit({ domain: "t", descriptors: [{ entries: [{ key: "u", value: "reset" }], limit }] });
    expect(r.statuses[0].duration_until_reset).toEqual({ seconds: 1, nanos: 0 });
    const m = await rls.shouldRateLimit({ domain: "t", descriptors: [user("reset")] });
    const d = m.statuses[0].duration_until_reset;
    expect(d.nanos).toBe(0);
    expect(d.seconds).toBeGreaterThanOrEqual(1);
    expect(d.seconds).toBeLessThanOrEqual(60);
  });

  it("an entry with an empty value is decided (the proto allows it)", async () => {
    const r = await rls.shouldRateLimit({ domain: "t", descriptors: [user("")] });
    expect(r.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 4, current_limit: { requests_per_unit: 5 } });
  });

  it("an empty domain or descriptor list: envoyproxy/ratelimit's errors", async () => {
    await expect(rls.shouldRateLimit({ domain: "", descriptors: [user("x")] })).rejects.toMatchObject({
      code: 2,
      details: "rate limit domain must not be empty",
    });
    await expect(rls.shouldRateLimit({ domain: "t", descriptors: [] })).rejects.toMatchObject({
      code: 2,
      details: "rate limit descriptor list must not be empty",
    });
  });
});

describe("grpc.health.v1 on the gRPC port", () => {
  it("Check and Watch: SERVING for the server and the RLS service; NOT_FOUND for others", async () => {
    expect(await health.check("")).toEqual({ status: "SERVING" });
    expect(await health.check("envoy.service.ratelimit.v3.RateLimitService")).toEqual({ status: "SERVING" });
    expect(await health.watchFirst("")).toEqual({ status: "SERVING" });
    await expect(health.check("nope")).rejects.toMatchObject({ code: 5 });
  });
});
