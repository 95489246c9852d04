/**
 * envoyproxy/ratelimit's HTTP endpoints on the service's HTTP port, answered as its Go server
 * answers them (src/server/server_impl.go `NewJsonHandler`, src/server/health.go `ServeHTTP`):
 * - `/json`: a `RateLimitRequest` in protobuf's JSON mapping (lowerCamelCase or the proto's
 *   names) in, the `RateLimitResponse` in protobuf's JSON mapping out (zero values left out),
 *   200, or 429 when over the limit; a body it cannot read or a request the service refuses is
 *   400 `Bad Request` as text, as its own test (test/server/server_impl_test.go) expects.
 * - `/healthcheck`: 200 `OK` while ready, 500 with an empty body when not (Redis down).
 * The same decisions as the gRPC API (one code path, transport/rls.ts).
 */
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clearOfMinuteEdge, serveRules, type InProcessService } from "./in-process.js";

const RULES = `
domain: j
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: named
    rate_limit: { name: gold, unit: hour, requests_per_unit: 2 }
  - key: vip
    rate_limit: { unlimited: true }
`;

let svc: InProcessService;
let base: string;

beforeAll(async () => {
  await clearOfMinuteEdge(); // its counts are in minute windows aligned on the clock
  svc = await serveRules(RULES, { maxBodyBytes: 4096 });
  base = `http://127.0.0.1:${svc.httpPort}`;
});

afterAll(async () => {
  await svc?.close();
});

async function post(body: string, pathname = "/json"): Promise<{ status: number; type: string | null; text: string; json: any }> {
  const r = await fetch(`${base}${pathname}`, { method: "POST", body });
  const text = await r.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, type: r.headers.get("content-type"), text, json };
}

const badRequest = { status: 400, type: "text/plain; charset=utf-8", text: "Bad Request\n" };

describe("POST /json, as envoyproxy/ratelimit's JSON handler", () => {
  it("its README's curl example: an unknown descriptor is OK with only the code", async () => {
    const r = await post('{"domain": "j", "descriptors": [{"entries": [{"key": "perday"}]}]}');
    expect(r.status).toBe(200);
    expect(r.type).toBe("application/json");
    expect(r.json).toEqual({ overallCode: "OK", statuses: [{ code: "OK" }] });
  });

  it("decides as gRPC does, in lowerCamelCase with zero values left out; 429 once over the limit", async () => {
    const req = JSON.stringify({ domain: "j", descriptors: [{ entries: [{ key: "user", value: "a" }] }] });
    const first = await post(req);
    expect(first.status).toBe(200);
    expect(first.json.overallCode).toBe("OK");
    const s = first.json.statuses[0];
    expect(s).toMatchObject({ code: "OK", currentLimit: { requestsPerUnit: 3, unit: "MINUTE" }, limitRemaining: 2 });
    expect(s.currentLimit).not.toHaveProperty("name"); // "" is a zero value
    expect(s.durationUntilReset).toMatch(/^\d+(\.\d{3})?s$/);
    expect(Object.keys(first.json)).toEqual(["overallCode", "statuses", "responseHeadersToAdd"]);
    expect(first.json.responseHeadersToAdd[0]).toEqual({ key: expect.any(String), value: expect.any(String) });
    await post(req);
    await post(req);
    const over = await post(req);
    expect(over.status).toBe(429);
    expect(over.json.overallCode).toBe("OVER_LIMIT");
    expect(over.json.statuses[0]).toMatchObject({ code: "OVER_LIMIT", currentLimit: { requestsPerUnit: 3, unit: "MINUTE" } });
    expect(over.json.statuses[0]).not.toHaveProperty("limitRemaining");
  });

  it("takes the proto's own field names too, hits_addend as a number or a string, descriptor limits and units by name or number", async () => {
    const r = await post(
      JSON.stringify({
        domain: "j",
        hits_addend: "2",
        descriptors: [
          { entries: [{ key: "named", value: "x" }] },
          { entries: [{ key: "vip", value: "y" }] },
          { entries: [{ key: "own", value: "z" }], limit: { requests_per_unit: 5, unit: 3 }, hitsAddend: 1 },
        ],
      }),
    );
    expect(r.status).toBe(200);
    expect(r.json.statuses[0]).toMatchObject({ code: "OK", currentLimit: { name: "gold", requestsPerUnit: 2, unit: "HOUR" } });
    expect(r.json.statuses[0]).not.toHaveProperty("limitRemaining"); // 2 of 2 used: 0
    expect(r.json.statuses[1]).toEqual({ code: "OK", limitRemaining: 4_294_967_295 });
    expect(r.json.statuses[2]).toMatchObject({ code: "OK", currentLimit: { requestsPerUnit: 5, unit: "HOUR" }, limitRemaining: 4 });
  });

  it("any method, as its handler (it reads the body whatever the method)", async () => {
    const r = await fetch(`${base}/json`, { method: "PUT", body: '{"domain":"j","descriptors":[{"entries":[{"key":"k"}]}]}' });
    expect(r.status).toBe(200);
  });

  it("the existing endpoints are unchanged", async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const c = await post(JSON.stringify({ domain: "j", descriptors: [[{ key: "user", value: "v1" }]] }), "/v1/check");
    expect(c.status).toBe(200);
    expect(c.json.allowed).toBe(true);
  });
});

describe("POST /json: hostile and bad bodies get its 400, never a 5xx or a pass", () => {
  const cases: Array<[string, string]> = [
    ["an empty body", ""],
    ["not JSON", "}"],
    ["JSON that is not an object", "[1,2]"],
    ["null", "null"],
    ["a string", '"domain"'],
    ["an empty domain (its service error)", '{"domain": "", "descriptors": [{"entries": [{"key": "a"}]}]}'],
    ["no descriptors (its service error)", '{"domain": "j"}'],
    ["an unknown field", '{"domain": "j", "descriptors": [{"entries": [{"key": "a"}]}], "evil": 1}'],
    ["an unknown field in an entry", '{"domain": "j", "descriptors": [{"entries": [{"key": "a", "x": 1}]}]}'],
    ["a domain that is not a string", '{"domain": 5, "descriptors": [{"entries": [{"key": "a"}]}]}'],
    ["descriptors that are not a list", '{"domain": "j", "descriptors": {"entries": []}}'],
    ["entries that are not a list", '{"domain": "j", "descriptors": [{"entries": "a=b"}]}'],
    ["a negative hitsAddend", '{"domain": "j", "hitsAddend": -1, "descriptors": [{"entries": [{"key": "a"}]}]}'],
    ["a hitsAddend above uint32", '{"domain": "j", "hitsAddend": 4294967296, "descriptors": [{"entries": [{"key": "a"}]}]}'],
    ["a fractional hitsAddend", '{"domain": "j", "hitsAddend": 1.5, "descriptors": [{"entries": [{"key": "a"}]}]}'],
    ["a hitsAddend string that is not a number", '{"domain": "j", "hitsAddend": "1e", "descriptors": [{"entries": [{"key": "a"}]}]}'],
    [
      "an unknown unit name",
      '{"domain": "j", "descriptors": [{"entries": [{"key": "a"}], "limit": {"requestsPerUnit": 1, "unit": "FORTNIGHT"}}]}',
    ],
    ["a __proto__ key", '{"domain": "j", "descriptors": [{"entries": [{"key": "a"}]}], "__proto__": {"polluted": 1}}'],
    ["an entry with an empty key", '{"domain": "j", "descriptors": [{"entries": [{"key": "", "value": "v"}]}]}'],
    ["a descriptor with no entries", '{"domain": "j", "descriptors": [{"entries": []}]}'],
  ];
  for (const [what, body] of cases) {
    it(what, async () => {
      const r = await post(body);
      expect({ status: r.status, type: r.type, text: r.text }).toEqual(badRequest);
    });
  }

  it("a descriptor's own hitsAddend is a uint64: up to 18446744073709551615 it is OVER_LIMIT (429), beyond it 400", async () => {
    for (const v of ['"18446744073709551615"', "18446744073709551615", '"9007199254740993"']) {
      const r = await post(`{"domain": "j", "descriptors": [{"entries": [{"key": "user", "value": "huge"}], "hitsAddend": ${v}}]}`);
      expect(r.status).toBe(429);
      expect(r.json.statuses[0]).toMatchObject({ code: "OVER_LIMIT", currentLimit: { requestsPerUnit: 3, unit: "MINUTE" } });
    }
    const beyond = await post('{"domain": "j", "descriptors": [{"entries": [{"key": "user"}], "hitsAddend": "18446744073709551616"}]}');
    expect({ status: beyond.status, text: beyond.text }).toEqual({ status: 400, text: "Bad Request\n" });
  });

  it("deeply nested JSON is refused without a crash", async () => {
    const deep = `{"domain": "j", "descriptors": ${"[".repeat(1500)}${"]".repeat(1500)}}`;
    const r = await post(deep);
    expect(r.status).toBe(400);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("a body above the service's cap is refused with 413 and the connection closed", async () => {
    const big = JSON.stringify({ domain: "j", descriptors: [{ entries: [{ key: "a", value: "x".repeat(5000) }] }] });
    const r = await fetch(`${base}/json`, { method: "POST", body: big });
    expect(r.status).toBe(413);
    expect(r.headers.get("connection")).toBe("close");
    expect(await r.text()).toBe("Request Entity Too Large\n");
  });

  it("more descriptors than the caps of every transport (64) are refused, as over gRPC", async () => {
    const descriptors = Array.from({ length: 65 }, () => ({ entries: [{ key: "k" }] }));
    const r = await post(JSON.stringify({ domain: "j", descriptors }));
    expect({ status: r.status, type: r.type, text: r.text }).toEqual(badRequest);
  });
});

describe("GET /healthcheck", () => {
  it("OK while ready", async () => {
    const r = await fetch(`${base}/healthcheck`);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("OK");
  });

  it("500 with an empty body while the store is down (the same readiness as /readyz)", async () => {
    // A port nothing listens on: Redis is unreachable from the start.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const down = await serveRules(RULES, { redisUrl: `redis://127.0.0.1:${port}` });
    try {
      const url = `http://127.0.0.1:${down.httpPort}`;
      let r = await fetch(`${url}/healthcheck`);
      for (let i = 0; i < 50 && r.status !== 500; i++) {
        await new Promise((res) => setTimeout(res, 200));
        r = await fetch(`${url}/healthcheck`);
      }
      expect(r.status).toBe(500);
      expect(await r.text()).toBe("");
      expect((await fetch(`${url}/readyz`)).status).toBe(503);
    } finally {
      await down.close();
    }
  }, 30_000);
});
