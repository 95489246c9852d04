/**
 * One address, one key, whatever text names it. IPv6 text has many spellings of one address
 * (`2001:db8::1`, `2001:DB8:0:0::1`, `2001:0db8::0001`) and an IPv4 client on a dual-stack socket
 * has several IPv4-mapped ones (`::ffff:1.2.3.4`, `0:0:0:0:0:ffff:1.2.3.4`, `::ffff:102:304`).
 * A forwarding header holds whatever its writer printed (a proxy, or Express's `req.ip`, which is
 * that text verbatim), so the key, the allow and deny lists and the trusted-proxy walk must not
 * depend on the spelling: else one client has as many allowances as spellings, a denied IPv4
 * client passes as `0:0:0:0:0:ffff:...`, and every such IPv4 client shares the bucket `::/64`.
 */
import { createServer } from "node:http";
import express from "express";
import { describe, expect, it } from "vitest";
import { rateLimit as expressLimit } from "../../src/adapters/express.js";
import { rateLimit as nodeLimit } from "../../src/adapters/node.js";
import { normalizeIp } from "../../src/http/ip.js";
import { httpRequest, loopbackServers } from "../http-support.js";

const listen = loopbackServers();

/** A node:http server behind a trusted loopback proxy (the test client plays the proxy), recording keys. */
async function behindProxy(extra: Record<string, unknown>): Promise<{ url: string; keys: string[] }> {
  const keys: string[] = [];
  const limit = nodeLimit({
    limits: [{ algorithm: "fixed-window", limit: 1, window: "1h" }],
    clock: () => 1_700_000_040_000,
    trustedProxies: ["loopback"],
    onDecision: (e: { key: string }) => keys.push(e.key),
    ...extra,
  } as never);
  const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
  return { url, keys };
}

const xff = (v: string) => ({ headers: { "x-forwarded-for": v } });

describe("normalizeIp gives one text per address", () => {
  it("unwraps every spelling of an IPv4-mapped address and prints IPv6 in RFC 5952 form", () => {
    for (const mapped of ["::ffff:203.0.113.9", "0:0:0:0:0:ffff:203.0.113.9", "::0:ffff:cb00:7109", "0:0:0:0:0:FFFF:CB00:7109"])
      expect(normalizeIp(mapped)).toBe("203.0.113.9");
    for (const v6 of ["2001:db8::1", "2001:DB8:0:0::1", "2001:0db8::0001", "2001:db8:0:0:0:0:0:1", "2001:db8::1%eth0"])
      expect(normalizeIp(v6)).toBe("2001:db8::1");
  });
});

describe("a forwarded address keys the same whatever its spelling", () => {
  it("ipv6Subnet 128: spellings of one address share one allowance", async () => {
    const s = await behindProxy({ ipv6Subnet: 128 });
    expect((await httpRequest(s.url, xff("2001:db8::1"))).status).toBe(200);
    expect((await httpRequest(s.url, xff("2001:0db8:0:0::0001"))).status).toBe(429);
    expect(s.keys).toEqual(["2001:db8::1", "2001:db8::1"]);
  });

  it("an IPv4-mapped spelling is the IPv4 client: its own key (not ::/64), and the deny list applies", async () => {
    const s = await behindProxy({ denyList: ["198.51.100.7"] });
    expect((await httpRequest(s.url, xff("0:0:0:0:0:ffff:203.0.113.9"))).status).toBe(200);
    expect((await httpRequest(s.url, xff("0:0:0:0:0:ffff:192.0.2.1"))).status).toBe(200);
    expect((await httpRequest(s.url, xff("203.0.113.9"))).status).toBe(429);
    expect(s.keys).toEqual(["203.0.113.9", "192.0.2.1", "203.0.113.9"]);
    expect((await httpRequest(s.url, xff("0:0:0:0:0:ffff:198.51.100.7"))).status).toBe(403);
  });

  it("a trusted proxy's mapped spelling is still trusted in the walk", async () => {
    const s = await behindProxy({ trustedProxies: ["loopback", "10.0.0.0/8"] });
    expect((await httpRequest(s.url, xff("203.0.113.9, 0:0:0:0:0:ffff:10.1.2.3"))).status).toBe(200);
    expect(s.keys).toEqual(["203.0.113.9"]);
  });

  it("Express trust proxy: req.ip is the header's text verbatim, keyed by the address it names", async () => {
    const keys: string[] = [];
    const app = express();
    app.set("trust proxy", "loopback");
    app.use(
      expressLimit({
        limits: [{ algorithm: "fixed-window", limit: 1, window: "1h" }],
        clock: () => 1_700_000_040_000,
        ipv6Subnet: 128,
        onDecision: (e: { key: string }) => keys.push(e.key),
      } as never),
    );
    app.get("/", (_req, res) => res.send("ok"));
    const url = await listen(createServer(app));
    expect((await httpRequest(url, xff("2001:db8::1"))).status).toBe(200);
    expect((await httpRequest(url, xff("2001:DB8:0::1"))).status).toBe(429);
    expect((await httpRequest(url, xff("0:0:0:0:0:ffff:203.0.113.9"))).status).toBe(200);
    expect(keys).toEqual(["2001:db8::1", "2001:db8::1", "203.0.113.9"]);
  });
});
