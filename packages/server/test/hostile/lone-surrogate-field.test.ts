/**
 * A lone surrogate (U+D800 to U+DFFF unpaired) in a JSON string the caller sent: Redis clients send
 * keys as UTF-8, where each becomes U+FFFD, so the library refuses such keys. The 400 must name the
 * field the caller sent and the position in it, not `key` and a position in the service's internal
 * state key (`<domain>|<key>`, `<domain>|user=<value>`), which the caller never sent.
 * In-process service over HTTP (POST /v1/check, single checks and batches). gRPC cannot carry one:
 * protobuf strings are UTF-8, decoded with invalid bytes as U+FFFD. Envoy's POST /json answers every
 * bad request with a bare "Bad Request", as envoyproxy/ratelimit does, so it names nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rlsClient, type RlsClient } from "../support.js";
import { serveRules, type InProcessService } from "../in-process.js";

const RULES = `
policies:
  p: { algorithm: fixed-window, limit: 100, window: 1h }
domains:
  - domain: d
    descriptors:
      - key: user
        algorithm: fixed-window
        limit: 100
        window: 1h
`;

let svc: InProcessService;
let rls: RlsClient;

beforeAll(async () => {
  svc = await serveRules(RULES);
  rls = rlsClient(svc.grpcPort);
});

afterAll(async () => {
  rls?.close();
  await svc?.close();
});

async function post(path: string, body: unknown): Promise<{ status: number; text: string }> {
  const r = await fetch(`http://127.0.0.1:${svc.httpPort}${path}`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  return { status: r.status, text: await r.text() };
}

const CASES: Array<[string, string, unknown, RegExp]> = [
  [
    "a descriptor value (list form)",
    "/v1/check",
    { domain: "d", descriptors: [[{ key: "user", value: "ab\ud800" }]] },
    /descriptors\[0\]\[0\]\.value: has a lone surrogate \(U\+D800 at index 2\)/,
  ],
  [
    "a descriptor value (object form)",
    "/v1/check",
    { domain: "d", descriptors: [{ user: "x\udc00" }] },
    /descriptors\[0\]\[0\]\.value: has a lone surrogate \(U\+DC00 at index 1\)/,
  ],
  [
    "a descriptor's second entry",
    "/v1/check",
    {
      domain: "d",
      descriptors: [
        [
          { key: "user", value: "1" },
          { key: "user", value: "\ud800z" },
        ],
      ],
    },
    /descriptors\[0\]\[1\]\.value: has a lone surrogate \(U\+D800 at index 0\)/,
  ],
  [
    "an entry key",
    "/v1/check",
    { domain: "d", descriptors: [[{ key: "us\ud800", value: "1" }]] },
    /descriptors\[0\]\[0\]\.key: has a lone surrogate \(U\+D800 at index 2\)/,
  ],
  [
    "the domain of a descriptor check",
    "/v1/check",
    { domain: "d\ud800", descriptors: [[{ key: "user", value: "1" }]] },
    /domain: has a lone surrogate \(U\+D800 at index 1\)/,
  ],
  ["a plain key", "/v1/check", { domain: "d", key: "x\ud800", policy: "p" }, /^[^]*"key: has a lone surrogate \(U\+D800 at index 1\)/],
  ["a plain key's domain", "/v1/check", { domain: "\ud800", key: "x", policy: "p" }, /domain: has a lone surrogate \(U\+D800 at index 0\)/],
];

describe("a lone surrogate in a JSON field is a 400 naming that field and the position in it", () => {
  for (const [name, path, body, message] of CASES) {
    it(name, async () => {
      const r = await post(path, body);
      expect(r.status, r.text).toBe(400);
      expect(r.text).toMatch(message);
      expect(r.text).not.toMatch(/\|/); // no internal state key
    });
  }

  it("a check in a batch: its result names checks[i]'s field", async () => {
    const body = {
      checks: [
        { domain: "d", descriptors: [{ user: "1" }] },
        { domain: "d", descriptors: [{ user: "\ud800" }] },
      ],
    };
    const r = await post("/v1/check", body);
    expect(r.status, r.text).toBe(200);
    const results = (JSON.parse(r.text) as { results: Array<{ error?: string; message?: string }> }).results;
    expect(results[0]?.error).toBeUndefined();
    expect(results[1]?.message).toMatch(/^checks\[1\]\.descriptors\[0\]\[0\]\.value: has a lone surrogate \(U\+D800 at index 0\)/);
  });

  it("well-formed text (a surrogate pair, U+FFFD) is decided as before", async () => {
    const r = await post("/v1/check", { domain: "d", descriptors: [[{ key: "user", value: "\ud83d\ude00\ufffd" }]] });
    expect(r.status, r.text).toBe(200);
  });
});
