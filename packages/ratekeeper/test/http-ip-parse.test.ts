/**
 * The HTTP layer parses addresses itself (src/http/ip-parse.ts) so that it loads where `node:net`
 * does not exist (Cloudflare Workers without nodejs_compat). These tests hold it to Node's own
 * `net.isIP` and `BlockList`, which it replaced, on random address-like text.
 */
import fc from "fast-check";
import { BlockList, isIP } from "node:net";
import { describe, expect, it } from "vitest";
import { ipVersion, parseIpv4, parseIpv6 } from "../src/http/ip-parse.js";
import { AddressSet, normalizeIp } from "../src/http/ip.js";

/** Text built from the pieces addresses are made of, so that near misses are common. */
const pieceArb = fc.oneof(
  fc.constantFrom(":", "::", ".", "0", "00", "01", "1", "9", "10", "255", "256", "999", "ffff", "FFFF", "12345", "g", "a", " ", ""),
  fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16)),
  fc.integer({ min: 0, max: 300 }).map(String),
);
const textArb = fc.array(pieceArb, { maxLength: 20 }).map((p) => p.join(""));

const v4Arb = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join("."));
const v6Arb = fc.oneof(
  fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 }).map((g) => g.map((x) => x.toString(16)).join(":")),
  fc
    .tuple(fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 4 }), fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 3 }))
    .map(([h, t]) => `${h.map((x) => x.toString(16)).join(":")}::${t.map((x) => x.toString(16)).join(":")}`),
  v4Arb.map((v4) => `::ffff:${v4}`),
  fc
    .tuple(fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 5 }), v4Arb)
    .map(([h, v4]) => `${h.map((x) => x.toString(16)).join(":")}::${v4}`),
);

describe("ipVersion (no node:net)", () => {
  it("agrees with net.isIP on random address-like text, valid addresses and near misses", () => {
    fc.assert(
      fc.property(fc.oneof(textArb, v4Arb, v6Arb), (text) => {
        expect(ipVersion(text)).toBe(isIP(text));
      }),
      { numRuns: 20_000 },
    );
  });

  it("parseIpv4 from an offset reads the tail as parseIpv4 reads it alone, and normalizeIp's '::ffff:' shortcut agrees with its full parse", () => {
    fc.assert(
      fc.property(fc.oneof(textArb, v4Arb), (tail) => {
        expect(parseIpv4(`::ffff:${tail}`, 7)).toBe(parseIpv4(tail));
        // An IPv4 tail: the shortcut answers the tail itself, as the full parse of the mapped address spelled out.
        if (parseIpv4(tail) === undefined) return;
        expect(normalizeIp(`::ffff:${tail}`)).toBe(tail);
        expect(normalizeIp(`0:0:0:0:0:ffff:${tail}`)).toBe(tail);
      }),
      { numRuns: 20_000 },
    );
  });

  it("known cases", () => {
    const cases: [string, number][] = [
      ["1.2.3.4", 4],
      ["01.2.3.4", 0],
      ["1.2.3", 0],
      ["256.0.0.1", 0],
      ["::", 6],
      ["::1", 6],
      ["1::", 6],
      ["1:2:3:4:5:6:7::", 6],
      ["1:2:3:4:5:6:7:8::", 0],
      ["1:2:3:4:5:6:1.2.3.4", 6],
      ["1:2:3:4:5:6::1.2.3.4", 0],
      ["::ffff:1.2.3.4", 6],
      ["1.2.3.4::", 0],
      [":::", 0],
      ["1::2::3", 0],
      ["12345::", 0],
      ["fe80::1%eth0", 0], // zones are stripped by the callers
    ];
    for (const [text, v] of cases) {
      expect([text, ipVersion(text)]).toEqual([text, v]);
      if (!text.includes("%")) expect([text, isIP(text)]).toEqual([text, v]);
    }
    expect(parseIpv4("203.0.113.9")).toBe(0xcb007109);
    expect(parseIpv6("64:ff9b::192.0.2.33")).toEqual([0x64, 0xff9b, 0, 0, 0, 0, 0xc000, 0x0221]);
  });
});

describe("AddressSet (no node:net)", () => {
  it("matches exactly what node:net's BlockList matches, for random ranges and addresses", () => {
    const rangeArb = fc.oneof(
      fc.tuple(v4Arb, fc.integer({ min: 0, max: 32 })).map(([a, b]) => ({ a, bits: b, type: "ipv4" as const })),
      fc.tuple(v6Arb, fc.integer({ min: 0, max: 128 })).map(([a, b]) => ({ a, bits: b, type: "ipv6" as const })),
    );
    fc.assert(
      fc.property(
        fc.array(rangeArb, { minLength: 1, maxLength: 4 }),
        fc.array(fc.oneof(v4Arb, v6Arb), { maxLength: 8 }),
        (ranges, probes) => {
          // Both sides see normalised addresses, as the resolver gives them (::ffff:a.b.c.d is a.b.c.d).
          const usable = ranges.filter((r) => (normalizeIp(r.a)?.includes(":") ?? false) === (r.type === "ipv6"));
          fc.pre(usable.length > 0);
          const list = new BlockList();
          for (const r of usable) list.addSubnet(normalizeIp(r.a) as string, r.bits, r.type);
          const set = new AddressSet(
            usable.map((r) => `${r.a}/${r.bits}`),
            "test",
          );
          for (const p of probes) {
            const n = normalizeIp(p) as string;
            expect([n, set.has(n)]).toEqual([n, list.check(n, n.includes(":") ? "ipv6" : "ipv4")]);
          }
          // Each range's own network address is inside it.
          for (const r of usable) expect(set.has(normalizeIp(r.a) as string)).toBe(true);
        },
      ),
      { numRuns: 3000 },
    );
  });
});
