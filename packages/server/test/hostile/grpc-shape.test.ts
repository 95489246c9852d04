/**
 * Envoy's rate limit gRPC API under requests no proxy would send: 100,000 descriptors, a
 * thousand entries in one, keys and values of megabytes, limits the service cannot honour.
 * Each gets INVALID_ARGUMENT naming the cap or the field, and the process stays small.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rlsClient, startServiceProcess, type RlsClient, type ServiceProc } from "../support.js";

const RULES = `
domains:
  - domain: d
    descriptors:
      - key: user
        algorithm: fixed-window
        limit: 100
        window: 1h
`;

let svc: ServiceProc;
let rls: RlsClient;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-hostile-grpc-"));
  writeFileSync(path.join(dir, "rules.yaml"), RULES);
  svc = await startServiceProcess(["--config", path.join(dir, "rules.yaml"), "--no-watch"]);
  rls = rlsClient(svc.grpcPort);
});

afterAll(async () => {
  rls?.close();
  await svc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function rss(pid: number): number {
  if (process.platform !== "linux") return 0;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) * 1024;
}

async function refused(req: unknown): Promise<{ code: number; details: string }> {
  try {
    await rls.shouldRateLimit(req);
  } catch (e) {
    return e as { code: number; details: string };
  }
  throw new Error("expected the call to fail");
}

const INVALID_ARGUMENT = 3;
const RESOURCE_EXHAUSTED = 8;
const one = (value: string) => ({ entries: [{ key: "user", value }] });

describe("gRPC ShouldRateLimit: request shapes are capped", () => {
  it("100,000 descriptors: refused before decoding (message size), and the process does not balloon", async () => {
    const before = rss(svc.proc.pid as number);
    const descriptors = Array.from({ length: 100_000 }, (_, i) => one(`u${i}`));
    const e = await refused({ domain: "d", descriptors });
    expect(e.code).toBe(RESOURCE_EXHAUSTED);
    expect(e.details).toMatch(/larger than max/);
    expect(rss(svc.proc.pid as number) - before).toBeLessThan(100 * 1024 * 1024);
  });

  it("1,000 descriptors (within the message size): INVALID_ARGUMENT naming the cap", async () => {
    const descriptors = Array.from({ length: 1000 }, (_, i) => one(`u${i}`));
    const e = await refused({ domain: "d", descriptors });
    expect(e.code).toBe(INVALID_ARGUMENT);
    expect(e.details).toMatch(/descriptors: at most \d+ per call \(got 1000\)/);
  });

  it("a descriptor of 1,000 entries: INVALID_ARGUMENT naming the cap", async () => {
    const entries = Array.from({ length: 1000 }, (_, i) => ({ key: `k${i}`, value: "v" }));
    const e = await refused({ domain: "d", descriptors: [{ entries }] });
    expect(e.code).toBe(INVALID_ARGUMENT);
    expect(e.details).toMatch(/descriptors\[0\]\.entries: at most \d+ entries \(got 1000\)/);
  });

  it("a huge key, value or domain: INVALID_ARGUMENT naming the field and the cap", async () => {
    const long = "x".repeat(100_000);
    for (const [req, field] of [
      [
        { domain: "d", descriptors: [{ entries: [{ key: long, value: "v" }] }] },
        /descriptors\[0\]\.entries\[0\]\.key: at most \d+ characters/,
      ],
      [{ domain: "d", descriptors: [one(long)] }, /descriptors\[0\]\.entries\[0\]\.value: at most \d+ characters/],
      [{ domain: long, descriptors: [one("a")] }, /domain: at most \d+ characters/],
    ] as const) {
      const e = await refused(req);
      expect(e.code).toBe(INVALID_ARGUMENT);
      expect(e.details).toMatch(field);
    }
  });

  it("a value as long as a request path with its query (20,000 characters) is decided, not refused", async () => {
    // Refused, the whole call fails and Envoy's default failure_mode_deny=false lets the request
    // through: a client could escape every limit of a route by sending a long query string.
    // envoyproxy/ratelimit decides any value; Envoy's own header limit (60 KiB) bounds it.
    const long = (c: string) => `/search?q=${c.repeat(20_000)}`;
    const first = await rls.shouldRateLimit({ domain: "d", descriptors: [one(long("a")), one("long-sibling")] });
    expect(first.overall_code).toBe("OK");
    expect(first.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 99 });
    const again = await rls.shouldRateLimit({ domain: "d", descriptors: [one(long("a"))] });
    expect(again.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 98 });
    const other = await rls.shouldRateLimit({ domain: "d", descriptors: [one(long("b"))] });
    expect(other.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 99 });
    const denied = await rls.shouldRateLimit({ domain: "d", descriptors: [one(long("a")), { ...one("x"), hits_addend: { value: 1000 } }] });
    expect(denied.overall_code).toBe("OVER_LIMIT");
  });

  it("a per-descriptor limit the service cannot honour is INVALID_ARGUMENT, not UNAVAILABLE", async () => {
    // 2^32 - 1 a day: its fixed window's arithmetic would pass 2^53.
    const e = await refused({ domain: "d", descriptors: [{ ...one("big"), limit: { requests_per_unit: 4_294_967_295, unit: "DAY" } }] });
    expect(e.code).toBe(INVALID_ARGUMENT);
    expect(e.details).toMatch(/descriptors\[0\]\.limit\.requests_per_unit/);
  });

  it("a per-descriptor limit of 0 puts every request over the limit (envoyproxy/ratelimit)", async () => {
    const r = await rls.shouldRateLimit({
      domain: "d",
      descriptors: [{ ...one("zero"), limit: { requests_per_unit: 0, unit: "SECOND" } }],
    });
    expect(r.overall_code).toBe("OVER_LIMIT");
    expect(r.statuses[0]).toMatchObject({
      code: "OVER_LIMIT",
      limit_remaining: 0,
      current_limit: { requests_per_unit: 0, unit: "SECOND" },
    });
  });

  it("a hits_addend beyond any limit is OVER_LIMIT and charges nothing (envoyproxy/ratelimit)", async () => {
    const r = await rls.shouldRateLimit({ domain: "d", descriptors: [one("h")], hits_addend: 4_294_967_295 });
    expect(r.overall_code).toBe("OVER_LIMIT");
    const after = await rls.shouldRateLimit({ domain: "d", descriptors: [one("h")] });
    expect(after.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 99 });
  });

  it("a descriptor's own hits_addend up to 2^64-1 (a UInt64Value Envoy may fill from a header) is OVER_LIMIT, not an error", async () => {
    // An error would make Envoy apply failure_mode_deny, which lets the request through by
    // default: envoyproxy/ratelimit counts such a cost and answers OVER_LIMIT.
    for (const value of ["18446744073709551615", "1152921504606846976", "9007199254740993"]) {
      const r = await rls.shouldRateLimit({ domain: "d", descriptors: [{ ...one("own-huge"), hits_addend: { value } }] });
      expect(r.overall_code).toBe("OVER_LIMIT");
      expect(r.statuses[0]).toMatchObject({ code: "OVER_LIMIT", limit_remaining: 0 });
    }
    const after = await rls.shouldRateLimit({ domain: "d", descriptors: [one("own-huge")] });
    expect(after.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 99 });
  });

  it("after all that, an ordinary request is answered", async () => {
    const r = await rls.shouldRateLimit({ domain: "d", descriptors: [one("fine")] });
    expect(r.overall_code).toBe("OK");
  });
});
