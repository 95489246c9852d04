/**
 * `trustedProxies` naming every address of a family (`0.0.0.0/0`; `::/0` or `::/1`, which hold
 * every IPv4-mapped address and so every IPv4 client) trusts every hop, as Express's
 * `trust proxy: true` does: any client picks its own rate-limit key by sending
 * `X-Forwarded-For: <any address>` and is never limited. It is honoured (the user asked for it),
 * but warned about once, like `true`, with RK_PERMISSIVE_TRUST_PROXY. (Express and Fastify refuse
 * a /0 range themselves: proxy-addr throws "invalid range".)
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { rateLimit as nodeLimit } from "../../src/adapters/node.js";
import type { RateLimitWarning } from "../../src/http/core.js";
import { httpRequest } from "../http-support.js";

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

function observer() {
  const keys: string[] = [];
  const warnings: RateLimitWarning[] = [];
  const options = {
    limits: [{ algorithm: "fixed-window" as const, limit: 1, window: "1h" as const }],
    clock: () => 1_700_000_040_000,
    onDecision: (e: { key: string }) => keys.push(e.key),
    onWarning: (w: RateLimitWarning) => warnings.push(w),
  };
  return { keys, warnings, options, codes: () => warnings.map((w) => w.code) };
}

async function listen(server: Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const xff = (v: string) => ({ headers: { "x-forwarded-for": v } });

describe("a trust setting covering every address warns like `true`", () => {
  for (const wide of [["0.0.0.0/0"], ["::/0"], ["loopback", "::/1"]]) {
    it(`trustedProxies ${JSON.stringify(wide)}`, async () => {
      const o = observer();
      const limit = nodeLimit({ ...o.options, trustedProxies: wide });
      const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
      expect((await httpRequest(url, xff("6.6.6.6"))).status).toBe(200);
      expect(o.keys).toEqual(["6.6.6.6"]);
      expect(o.codes()).toEqual(["RK_PERMISSIVE_TRUST_PROXY"]);
      expect((o.warnings[0] as RateLimitWarning).message).toContain(`trustedProxies: ${JSON.stringify(wide)}`);
    });
  }

  it("narrower settings stay quiet", async () => {
    const o = observer();
    const limit = nodeLimit({ ...o.options, trustedProxies: ["loopback", "10.0.0.0/8", "2000::/3"] });
    const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
    await httpRequest(url, xff("6.6.6.6"));
    expect(o.codes()).toEqual([]);
  });
});
