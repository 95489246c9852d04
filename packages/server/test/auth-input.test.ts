/**
 * `GET /v1/auth`'s input shortcuts against the plain reading they replace: `authHeaders` hands
 * authInput the request's headers exactly when one is named `X-RateLimit-*` (any case), and
 * `parseDescriptorKey` scans with indexOf what `split("|")` used to cut. Both must give what the
 * plain code gives for every input, hostile ones included.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { IncomingHttpHeaders } from "node:http";
import { authHeaders, authInput, Query } from "../src/transport/check-input.js";
import { parseDescriptorKey } from "../src/service/descriptor-key.js";

/** The reading before the shortcut: split on "|", each part key=value with both sides non-empty. */
function parseBySplit(text: string): { key: string; value: string }[] | undefined {
  const out: { key: string; value: string }[] = [];
  for (const part of text.split("|")) {
    const eq = part.indexOf("=");
    if (eq <= 0 || eq === part.length - 1) return undefined;
    out.push({ key: part.slice(0, eq), value: part.slice(eq + 1) });
  }
  return out.length > 0 ? out : undefined;
}

/** A request as node gives it: raw names as sent, and the lower-cased header object. */
function request(raw: string[]): { rawHeaders: string[]; headers: IncomingHttpHeaders } {
  const headers: IncomingHttpHeaders = {};
  for (let i = 0; i < raw.length; i += 2) headers[(raw[i] as string).toLowerCase()] = raw[i + 1];
  return { rawHeaders: raw, headers };
}

describe("parseDescriptorKey", () => {
  it("reads what split('|') read, for any text over the separators", () => {
    const text = fc.stringMatching(/^[a-c=|]{0,12}$/);
    fc.assert(
      fc.property(text, (t) => {
        expect(parseDescriptorKey(t)).toEqual(parseBySplit(t));
      }),
      { numRuns: 5_000 },
    );
  });

  it("keeps '=' inside a value and refuses empty parts", () => {
    expect(parseDescriptorKey("a=b=c|d=e")).toEqual([
      { key: "a", value: "b=c" },
      { key: "d", value: "e" },
    ]);
    for (const bad of ["", "|", "a=b|", "|a=b", "a=|b=c", "=a", "a", "a=b||c=d"]) expect(parseDescriptorKey(bad)).toBeUndefined();
  });
});

describe("authHeaders", () => {
  it("gives the headers exactly when a name starts with x-ratelimit- in any case", () => {
    const name = fc.oneof(
      fc.constantFrom("Host", "x-ratelimit", "X-RateLimit-", "x-ratelimit-cost", "X-RATELIMIT-DOMAIN", "x_ratelimit-key", "xx-ratelimit-a"),
      fc.stringMatching(/^[xX-][-a-zA-Z]{0,14}$/),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(name, fc.constant("v")), { maxLength: 6 }), (pairs) => {
        const req = request(pairs.flat());
        const expected = pairs.some(([n]) => n.length > 12 && n.toLowerCase().startsWith("x-ratelimit-"));
        expect(authHeaders(req) === req.headers).toBe(expected);
        if (!expected) expect(authHeaders(req)).toEqual({});
      }),
      { numRuns: 3_000 },
    );
  });

  it("lets authInput read X-RateLimit-* headers sent in any case, and ignores the rest", () => {
    const req = request([
      "Host",
      "a",
      "X-RATELIMIT-DENY-STATUS",
      "403",
      "x-RateLimit-Descriptor",
      "user=1",
      "X-RateLimit-Descriptor-2",
      "ip=2",
    ]);
    const { input, denyStatus } = authInput(new Query("domain=api"), authHeaders(req));
    expect(denyStatus).toBe(403);
    expect(input.descriptors).toEqual([[{ key: "user", value: "1" }], [{ key: "ip", value: "2" }]]);
    // Without such a header, only the query counts, whatever else the request carries.
    const plain = request(["Host", "a", "Cookie", "x-ratelimit-cost=9", "Accept", "*/*"]);
    const q = authInput(new Query("domain=api&d=user%3D1"), authHeaders(plain));
    expect(q.input.cost).toBeUndefined();
    expect(q.denyStatus).toBe(429);
  });
});
