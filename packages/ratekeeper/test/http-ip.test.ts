import { describe, expect, it } from "vitest";
import { AddressSet, ClientIpResolver, expandIpv6, ipv6Prefix, normalizeIp, parseForwardedChain } from "../src/http/ip.js";
import { RateLimitConfigError } from "../src/core/errors.js";

describe("normalizeIp", () => {
  it("unwraps IPv4-mapped IPv6 (dotted and hex forms), strips zones, lower-cases, rejects junk", () => {
    expect(normalizeIp("::ffff:203.0.113.9")).toBe("203.0.113.9");
    expect(normalizeIp("::FFFF:203.0.113.9")).toBe("203.0.113.9");
    expect(normalizeIp("::ffff:cb00:7109")).toBe("203.0.113.9");
    expect(normalizeIp("fe80::1%eth0")).toBe("fe80::1");
    expect(normalizeIp("2001:DB8::1")).toBe("2001:db8::1");
    expect(normalizeIp("10.0.0.1")).toBe("10.0.0.1");
    for (const bad of [undefined, "", "unknown", "1.2.3", "10.0.0.1:80", "::ffff:zz", "1.2.3.4%x"])
      expect(normalizeIp(bad)).toBeUndefined();
  });
});

describe("expandIpv6 / ipv6Prefix", () => {
  it("expands ::, leading/trailing ::, and embedded IPv4", () => {
    expect(expandIpv6("::")).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(expandIpv6("::1")).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    expect(expandIpv6("2001:db8::")).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]);
    expect(expandIpv6("2001:db8:0:1:2:3:4:5")).toEqual([0x2001, 0xdb8, 0, 1, 2, 3, 4, 5]);
    expect(expandIpv6("64:ff9b::192.0.2.33")).toEqual([0x64, 0xff9b, 0, 0, 0, 0, 0xc000, 0x0221]);
    expect(expandIpv6("fe80::1%eth0")).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
    expect(() => expandIpv6("1.2.3.4")).toThrow(RangeError);
  });

  it("zeroes host bits at any prefix length and prints RFC 5952 form", () => {
    const a = "2001:db8:abcd:1234:5678:9abc:def0:1234";
    expect(ipv6Prefix(a, 64)).toBe("2001:db8:abcd:1234::/64");
    expect(ipv6Prefix(a, 56)).toBe("2001:db8:abcd:1200::/56");
    expect(ipv6Prefix(a, 48)).toBe("2001:db8:abcd::/48");
    expect(ipv6Prefix(a, 60)).toBe("2001:db8:abcd:1230::/60");
    expect(ipv6Prefix(a, 127)).toBe("2001:db8:abcd:1234:5678:9abc:def0:1234/127");
    expect(ipv6Prefix(a, 1)).toBe("::/1");
    expect(ipv6Prefix("8000::1", 1)).toBe("8000::/1");
    expect(ipv6Prefix("::1", 64)).toBe("::/64");
    // The longest zero run is compressed; a single zero group is not.
    expect(ipv6Prefix("1:0:2:0:0:3:0:0", 128)).toBe("1:0:2::3:0:0/128");
    expect(ipv6Prefix("1:2:3:4:5:6:7:0", 128)).toBe("1:2:3:4:5:6:7:0/128");
  });

  it("two addresses share a prefix exactly when their first `bits` bits agree (random check)", () => {
    for (let i = 0; i < 200; i++) {
      const g = Array.from({ length: 8 }, () => Math.floor(Math.random() * 0x10000));
      const bits = 1 + Math.floor(Math.random() * 128);
      const h = [...g];
      const flip = Math.floor(Math.random() * 128);
      const gi = flip >> 4;
      h[gi] = (h[gi] as number) ^ (0x8000 >> (flip & 15));
      const text = (x: number[]) => x.map((n) => n.toString(16)).join(":");
      expect(ipv6Prefix(text(g), bits) === ipv6Prefix(text(h), bits)).toBe(flip >= bits);
    }
  });
});

describe("AddressSet", () => {
  it("matches addresses, CIDRs and presets; names each bad entry", () => {
    const s = new AddressSet(["10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "loopback"], "allowList");
    for (const yes of ["10.200.3.4", "192.0.2.7", "2001:db8:ffff::1", "127.0.0.1", "::1"]) expect(s.has(yes)).toBe(true);
    for (const no of ["11.0.0.1", "192.0.2.8", "2001:db9::1", "::2"]) expect(s.has(no)).toBe(false);
    try {
      new AddressSet(["10.0.0.0/33", "nope", "::1/129", "1.2.3.4"], "trustedProxies");
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(RateLimitConfigError);
      expect((e as RateLimitConfigError).issues.map((i) => i.path)).toEqual([
        "trustedProxies[0]",
        "trustedProxies[1]",
        "trustedProxies[2]",
      ]);
    }
  });

  it("takes IPv4-mapped IPv6 ranges, their bits counted in IPv6, as proxy-addr does", () => {
    // /96 and longer: the IPv4 range of bits - 96 (refused as "bits > 32" before).
    const s = new AddressSet(["::ffff:10.0.0.0/104", "::ffff:c000:200/120"], "trustedProxies");
    for (const yes of ["10.1.2.3", "10.9.9.9", "192.0.2.77"]) expect(s.has(yes), yes).toBe(true);
    for (const no of ["11.0.0.1", "192.0.3.1", "::1"]) expect(s.has(no), no).toBe(false);
    // Shorter than /96: an IPv6 range, which holds every IPv4 address through their mapped forms.
    const wide = new AddressSet(["::ffff:0:0/95"], "trustedProxies");
    expect(wide.has("1.2.3.4")).toBe(true);
    expect(wide.coversAllOfAFamily).toBe(true);
    expect(() => new AddressSet(["::ffff:10.0.0.0/129"], "trustedProxies")).toThrow(/trustedProxies\[0\]/);
  });

  it("covers a whole family through the union of its ranges, not only one /0", () => {
    const covers = (e: string[]) => new AddressSet(e, "trustedProxies").coversAllOfAFamily;
    expect(covers(["0.0.0.0/1", "128.0.0.0/1"])).toBe(true);
    expect(covers(["128.0.0.0/1", "10.0.0.0/8", "0.0.0.0/1"])).toBe(true);
    expect(covers(["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2"])).toBe(true);
    expect(covers(["0.0.0.0/1", "128.0.0.0/2", "224.0.0.0/3"])).toBe(false); // 192.0.0.0/3 missing
    expect(covers(["::/1", "8000::/1"])).toBe(true);
    expect(covers(["2000::/3", "::/3", "4000::/2", "8000::/1"])).toBe(true);
    expect(covers(["2000::/3", "4000::/2", "8000::/1"])).toBe(false); // ::/3 missing (and with it ::ffff:0:0/96)
    expect(covers(["10.0.0.0/8", "loopback"])).toBe(false);
  });
});

describe("parseForwardedChain", () => {
  it("reads X-Forwarded-For and RFC 7239 Forwarded, dropping ports and brackets", () => {
    expect(parseForwardedChain("1.2.3.4, 10.0.0.1:8080 , [2001:db8::1]:443", "x-forwarded-for")).toEqual([
      "1.2.3.4",
      "10.0.0.1",
      "2001:db8::1",
    ]);
    expect(
      parseForwardedChain('for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711", proto=https', "forwarded"),
    ).toEqual(["192.0.2.60", "2001:db8:cafe::17", ""]);
  });
});

describe("ClientIpResolver", () => {
  it("trusts nobody by default: the peer, whatever the headers say", () => {
    const r = new ClientIpResolver();
    expect(r.resolve("::ffff:198.51.100.1", "6.6.6.6")).toBe("198.51.100.1");
  });

  it("walks from the right past trusted hops; stops at the first untrusted one", () => {
    const r = new ClientIpResolver({ trustedProxies: ["10.0.0.0/8"] });
    expect(r.resolve("10.0.0.1", "6.6.6.6, 203.0.113.9, 10.0.0.2")).toBe("203.0.113.9");
    expect(r.resolve("10.0.0.1", "10.0.0.3, 10.0.0.2")).toBe("10.0.0.3"); // every hop trusted: the leftmost
    expect(r.resolve("198.51.100.1", "203.0.113.9")).toBe("198.51.100.1"); // peer untrusted: header ignored
    expect(r.resolve("10.0.0.1", "garbage, 10.0.0.2")).toBe("10.0.0.2"); // unparseable: the last hop vouched for
    expect(r.resolve("10.0.0.1", undefined)).toBe("10.0.0.1");
    expect(r.resolve(undefined, "1.2.3.4")).toBeUndefined();
  });

  it("groups IPv6 by the configured prefix; IPv4 untouched", () => {
    expect(new ClientIpResolver().group("2001:db8:1:2:3:4:5:6")).toBe("2001:db8:1:2::/64");
    expect(new ClientIpResolver({ ipv6Subnet: 48 }).group("2001:db8:1:2:3:4:5:6")).toBe("2001:db8:1::/48");
    expect(new ClientIpResolver({ ipv6Subnet: 128 }).group("2001:db8::6")).toBe("2001:db8::6");
    expect(new ClientIpResolver().group("203.0.113.9")).toBe("203.0.113.9");
  });

  it("remembers peers and groups without changing an answer, and stays bounded under a flood of addresses", () => {
    const r = new ClientIpResolver();
    for (let round = 0; round < 2; round++) {
      // The second round answers from the memos: the same results, bad addresses included.
      expect(r.resolve("::ffff:198.51.100.1", undefined)).toBe("198.51.100.1");
      expect(r.resolve("not an address", undefined)).toBeUndefined();
      expect(r.resolve("", undefined)).toBeUndefined();
      expect(r.group("2001:db8:1:2:3:4:5:6")).toBe("2001:db8:1:2::/64");
    }
    // 50,000 distinct peers (IPv4 and IPv6): every answer still right, and the memos stay small.
    for (let i = 0; i < 25_000; i++) {
      expect(r.resolve(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, undefined)).toBe(
        `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      );
      const v6 = `2001:db8:${i.toString(16)}::1`;
      expect(r.group(r.resolve(v6, undefined) as string)).toBe(ipv6Prefix(v6, 64));
    }
    const memo = r as unknown as { peers: Map<string, unknown>; groups: Map<string, unknown> };
    expect(memo.peers.size).toBeLessThanOrEqual(4096);
    expect(memo.groups.size).toBeLessThanOrEqual(4096);
  });

  it("rejects bad options by name", () => {
    expect(() => new ClientIpResolver({ ipv6Subnet: 0 })).toThrow(/ipv6Subnet/);
    expect(() => new ClientIpResolver({ forwardedHeader: "x-real-ip" as "forwarded" })).toThrow(/forwardedHeader/);
    expect(() => new ClientIpResolver({ trustedProxies: ["300.1.1.1"] })).toThrow(/trustedProxies\[0\]/);
  });
});
