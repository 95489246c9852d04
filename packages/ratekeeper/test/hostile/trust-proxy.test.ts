/**
 * Who the client is, when a request carries X-Forwarded-For. The header is client input: a
 * client must never choose its own rate-limit key unless a proxy the user trusts wrote it. Each
 * framework's own trust setting is honoured (Express `app.set("trust proxy", ...)`, Fastify's
 * `trustProxy`), `trustedProxies` wins over it, and the validations warn once, with a code and
 * what to do, when a header arrives that nothing trusts or when the framework trusts every hop.
 */
import type { AddressInfo } from "node:net";
import { createServer, type Server } from "node:http";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { rateLimit as expressLimit } from "../../src/adapters/express.js";
import { rateLimitPlugin } from "../../src/adapters/fastify.js";
import { rateLimit as honoLimit } from "../../src/adapters/hono.js";
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

/** What one middleware saw: the keys it used and the warnings it gave. */
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

/** An Express app on loopback with the middleware in front of a 200 (`setup` configures the app first). */
async function expressApp(options: Record<string, unknown>, setup: (app: express.Express) => void = () => {}): Promise<string> {
  const app = express();
  setup(app);
  app.use(expressLimit(options as never));
  app.get("/", (_req, res) => res.send("ok"));
  return listen(createServer(app));
}

const xff = (v: string) => ({ headers: { "x-forwarded-for": v } });

describe("Express: app.set('trust proxy') is honoured; a spoofed X-Forwarded-For never picks the key", () => {
  it("default (trust nobody): the header is ignored, every spoofed address is the peer's one bucket; RK_FORWARDED_HEADER_IGNORED once", async () => {
    const o = observer();
    const url = await expressApp(o.options);
    expect((await httpRequest(url, xff("1.1.1.1"))).status).toBe(200);
    expect((await httpRequest(url, xff("2.2.2.2"))).status).toBe(429);
    expect((await httpRequest(url, xff("3.3.3.3, 4.4.4.4"))).status).toBe(429);
    expect(o.keys).toEqual(["127.0.0.1", "127.0.0.1", "127.0.0.1"]);
    expect(o.codes()).toEqual(["RK_FORWARDED_HEADER_IGNORED"]);
    const w = (o.warnings[0] as RateLimitWarning).message;
    expect(w).toMatch(/trustedProxies/); // says what to do
    expect(w).toMatch(/app\.set\("trust proxy"/);
    expect(w).toMatch(/validate: \{ forwardedHeader: false \}/);
  });

  it('trust proxy "loopback": the client is the rightmost untrusted hop; what a client writes to its left changes nothing', async () => {
    const o = observer();
    const url = await expressApp(o.options, (app) => app.set("trust proxy", "loopback"));
    expect((await httpRequest(url, xff("6.6.6.6, 203.0.113.9"))).status).toBe(200);
    expect((await httpRequest(url, xff("7.7.7.7, 203.0.113.9"))).status).toBe(429);
    expect((await httpRequest(url, xff("203.0.113.10"))).status).toBe(200);
    expect((await httpRequest(url, xff("127.0.0.5, 198.51.100.1, 127.0.0.1"))).status).toBe(200);
    expect(o.keys).toEqual(["203.0.113.9", "203.0.113.9", "203.0.113.10", "198.51.100.1"]);
    expect(o.warnings).toEqual([]);
  });

  it("trust proxy 1 (one hop): the last X-Forwarded-For entry is the client, whatever precedes it", async () => {
    const o = observer();
    const url = await expressApp(o.options, (app) => app.set("trust proxy", 1));
    await httpRequest(url, xff("1.1.1.1, 192.0.2.7"));
    await httpRequest(url, xff("2.2.2.2, 192.0.2.7"));
    expect(o.keys).toEqual(["192.0.2.7", "192.0.2.7"]);
  });

  it("a sub-app mounted under a trusting app inherits its setting", async () => {
    const o = observer();
    const parent = express();
    parent.set("trust proxy", "loopback");
    const child = express();
    child.use(expressLimit(o.options));
    child.get("/", (_req, res) => res.send("ok"));
    parent.use("/api", child);
    const url = await listen(createServer(parent));
    await httpRequest(url, { path: "/api/", ...xff("203.0.113.9") });
    expect(o.keys).toEqual(["203.0.113.9"]);
  });

  it("trust proxy true (every hop): honoured as Express does, with RK_PERMISSIVE_TRUST_PROXY once, saying what to set instead", async () => {
    const o = observer();
    const url = await expressApp(o.options, (app) => app.set("trust proxy", true));
    await httpRequest(url, xff("1.1.1.1"));
    await httpRequest(url, xff("2.2.2.2"));
    expect(o.keys).toEqual(["1.1.1.1", "2.2.2.2"]);
    expect(o.codes()).toEqual(["RK_PERMISSIVE_TRUST_PROXY"]);
    expect((o.warnings[0] as RateLimitWarning).message).toMatch(/app\.set\("trust proxy", 1\)[\s\S]*trustedProxies/);
  });

  it("trustedProxies wins over the app's setting: [] trusts nobody; a disagreement warns RK_TRUST_PROXY_OVERRIDDEN once", async () => {
    const none = observer();
    const url1 = await expressApp({ ...none.options, trustedProxies: [] }, (app) => app.set("trust proxy", "loopback"));
    await httpRequest(url1, xff("203.0.113.9"));
    expect(none.keys).toEqual(["127.0.0.1"]);
    expect(none.warnings).toEqual([]);

    const both = observer();
    const url2 = await expressApp({ ...both.options, trustedProxies: ["loopback"] }, (app) => app.set("trust proxy", 2));
    await httpRequest(url2, xff("203.0.113.9")); // both agree: 203.0.113.9
    await httpRequest(url2, xff("198.51.100.1, 203.0.113.9")); // trustedProxies: 203.0.113.9; two hops: 198.51.100.1
    await httpRequest(url2, xff("198.51.100.2, 203.0.113.9"));
    expect(both.keys).toEqual(["203.0.113.9", "203.0.113.9", "203.0.113.9"]);
    expect(both.codes()).toEqual(["RK_TRUST_PROXY_OVERRIDDEN"]);
  });

  it("validate: false turns the checks off; validate: { forwardedHeader: false } that one only", async () => {
    const off = observer();
    const url = await expressApp({ ...off.options, validate: false });
    await httpRequest(url, xff("1.1.1.1"));
    expect(off.warnings).toEqual([]);
    const one = observer();
    const url2 = await expressApp({ ...one.options, validate: { forwardedHeader: false } }, (app) => app.set("trust proxy", true));
    await httpRequest(url2, xff("1.1.1.1"));
    expect(one.codes()).toEqual(["RK_PERMISSIVE_TRUST_PROXY"]);
    expect(() => expressLimit({ ...one.options, validate: { xForwardedFor: false } } as never)).toThrow(
      /validate\.xForwardedFor: unknown check: the checks are forwardedHeader, trustProxy, unsharedStore/,
    );
  });

  it("without onWarning the warning goes to console.warn, once", async () => {
    const seen: string[] = [];
    const original = console.warn;
    console.warn = (m: string) => seen.push(m);
    try {
      const o = observer();
      const { onWarning: _drop, ...options } = o.options;
      const url = await expressApp(options);
      await httpRequest(url, xff("1.1.1.1"));
      await httpRequest(url, xff("1.1.1.2"));
    } finally {
      console.warn = original;
    }
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatch(/^ratekeeper \[RK_FORWARDED_HEADER_IGNORED\]: .*docs\/middleware\.md#validations$/);
  });
});

describe("Fastify: the server's trustProxy is honoured", () => {
  async function fastifyApp(trustProxy: unknown, options: Record<string, unknown>) {
    const app = Fastify(trustProxy === undefined ? {} : { trustProxy: trustProxy as never });
    await app.register(rateLimitPlugin, options);
    app.get("/", () => "ok");
    return app;
  }

  it("no trustProxy: the header is ignored (one bucket) and RK_FORWARDED_HEADER_IGNORED warns once", async () => {
    const o = observer();
    const app = await fastifyApp(undefined, o.options);
    expect((await app.inject({ url: "/", headers: { "x-forwarded-for": "1.1.1.1" } })).statusCode).toBe(200);
    expect((await app.inject({ url: "/", headers: { "x-forwarded-for": "2.2.2.2" } })).statusCode).toBe(429);
    expect(o.keys).toEqual(["127.0.0.1", "127.0.0.1"]);
    expect(o.codes()).toEqual(["RK_FORWARDED_HEADER_IGNORED"]);
  });

  it('trustProxy "127.0.0.1": the rightmost untrusted hop; trustProxy true: honoured with RK_PERMISSIVE_TRUST_PROXY', async () => {
    const o = observer();
    const app = await fastifyApp("127.0.0.1", o.options);
    await app.inject({ url: "/", headers: { "x-forwarded-for": "6.6.6.6, 203.0.113.9" } });
    await app.inject({ url: "/", headers: { "x-forwarded-for": "7.7.7.7, 203.0.113.9" } });
    expect(o.keys).toEqual(["203.0.113.9", "203.0.113.9"]);
    expect(o.warnings).toEqual([]);

    const all = observer();
    const open = await fastifyApp(true, all.options);
    await open.inject({ url: "/", headers: { "x-forwarded-for": "6.6.6.6, 203.0.113.9" } });
    expect(all.keys).toEqual(["6.6.6.6"]);
    expect(all.codes()).toEqual(["RK_PERMISSIVE_TRUST_PROXY"]);
    expect((all.warnings[0] as RateLimitWarning).message).toMatch(/Fastify\(\{ trustProxy: true \}\)/);
  });
});

describe("Hono and node:http (no framework setting): only trustedProxies makes the header count", () => {
  it("Hono: ignored and warned without trustedProxies; read from the right with it", async () => {
    const o = observer();
    const app = new Hono();
    app.use(honoLimit({ ...o.options, getRemoteAddress: () => "127.0.0.1" }));
    app.get("/", (c) => c.text("ok"));
    expect((await app.request("/", xff("1.1.1.1"))).status).toBe(200);
    expect((await app.request("/", xff("2.2.2.2"))).status).toBe(429);
    expect(o.keys).toEqual(["127.0.0.1", "127.0.0.1"]);
    expect(o.codes()).toEqual(["RK_FORWARDED_HEADER_IGNORED"]);

    const t = observer();
    const trusted = new Hono();
    trusted.use(honoLimit({ ...t.options, trustedProxies: ["loopback"], getRemoteAddress: () => "127.0.0.1" }));
    trusted.get("/", (c) => c.text("ok"));
    await trusted.request("/", xff("6.6.6.6, 203.0.113.9"));
    expect(t.keys).toEqual(["203.0.113.9"]);
    expect(t.warnings).toEqual([]);
  });

  it("node:http: the same", async () => {
    const o = observer();
    const limit = nodeLimit(o.options);
    const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
    expect((await httpRequest(url, xff("1.1.1.1"))).status).toBe(200);
    expect((await httpRequest(url, xff("2.2.2.2"))).status).toBe(429);
    expect(o.keys).toEqual(["127.0.0.1", "127.0.0.1"]);
    expect(o.codes()).toEqual(["RK_FORWARDED_HEADER_IGNORED"]);
  });
});

describe("options from other limiters get a message that says what to write", () => {
  it.each([
    ["trustProxy", { trustProxy: true }, /trustProxy: not an option here: name the proxies .* with trustedProxies/],
    ["timeWindow (@fastify/rate-limit)", { timeWindow: 60_000 }, /timeWindow: @fastify\/rate-limit's option: write limits: \[/],
    ["points (rate-limiter-flexible)", { points: 5 }, /points: rate-limiter-flexible's option/],
    ["a typo", { keyPrefx: "a" }, /keyPrefx: unknown option; the options are .*keyPrefix/],
  ])("%s", (_name, extra, message) => {
    const o = observer();
    expect(() => nodeLimit({ ...o.options, ...extra })).toThrow(message);
  });
});

describe("the forwarded-header check reads what arrived on the wire", () => {
  // node:http, Express and Fastify scan the raw header list (node builds req.headers only when
  // asked); Hono on @hono/node-server answers a missing name from node's own header object.
  const plain = (o: ReturnType<typeof observer>) => ({
    ...o.options,
    limits: [{ algorithm: "fixed-window" as const, limit: 100, window: "1h" as const }],
  });
  const starts: Record<string, (o: ReturnType<typeof observer>) => Promise<string>> = {
    "node:http": (o) => {
      const limit = nodeLimit(plain(o));
      return listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
    },
    express: (o) => expressApp(plain(o)),
    fastify: async (o) => {
      const app = Fastify();
      await app.register(rateLimitPlugin, plain(o));
      app.get("/", () => "ok");
      await app.listen({ port: 0, host: "127.0.0.1" });
      servers.push(app.server);
      return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    },
    "hono (@hono/node-server)": async (o) => {
      const { serve } = await import("@hono/node-server");
      const app = new Hono();
      app.use(honoLimit(plain(o)));
      app.get("/", (c) => c.text("ok"));
      const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
      await new Promise<void>((r) => (server.listening ? r() : server.once("listening", () => r())));
      servers.push(server);
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
  };
  for (const [name, start] of Object.entries(starts)) {
    it(`${name}: silent without one; Forwarded alone, or a mixed-case X-FORWARDED-FOR, is seen`, async () => {
      const none = observer();
      const a = await start(none);
      expect((await httpRequest(a, { headers: { "x-forwarded-host": "h", forwarded_x: "1" } })).status).toBe(200);
      expect(none.codes()).toEqual([]);

      const fwd = observer();
      const b = await start(fwd);
      await httpRequest(b, { headers: { Forwarded: "for=1.1.1.1" } });
      expect(fwd.codes()).toEqual(["RK_FORWARDED_HEADER_IGNORED"]);
      expect((fwd.warnings[0] as RateLimitWarning).message).toMatch(/carried Forwarded /);

      const upper = observer();
      const c = await start(upper);
      await httpRequest(c, { headers: { "X-FORWARDED-FOR": "1.1.1.1", Forwarded: "for=2.2.2.2" } });
      expect((upper.warnings[0] as RateLimitWarning).message).toMatch(/carried X-Forwarded-For /);
    });
  }
});

/*
 * `trustedProxies` naming every address of a family (`0.0.0.0/0`; `::/0` or `::/1`, which hold
 * every IPv4-mapped address and so every IPv4 client) trusts every hop, as Express's
 * `trust proxy: true` does: any client picks its own rate-limit key by sending
 * `X-Forwarded-For: <any address>` and is never limited. It is honoured (the user asked for it),
 * but warned about once, like `true`, with RK_PERMISSIVE_TRUST_PROXY. (Express and Fastify refuse
 * a /0 range themselves: proxy-addr throws "invalid range".)
 */
describe("a trust setting covering every address warns like `true`", () => {
  for (const wide of [
    ["0.0.0.0/0"],
    ["::/0"],
    ["loopback", "::/1"],
    // Split ranges whose union is every address: as wide as one /0.
    ["0.0.0.0/1", "128.0.0.0/1"],
    ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/1"],
    ["::/1", "8000::/1"],
    ["0.0.0.0/1", "::ffff:128.0.0.0/97"],
  ]) {
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
    const limit = nodeLimit({
      ...o.options,
      trustedProxies: ["loopback", "10.0.0.0/8", "2000::/3", "0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3", "224.0.0.0/4", "240.0.0.0/5"],
    });
    const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
    await httpRequest(url, xff("6.6.6.6"));
    expect(o.codes()).toEqual([]);
  });
});
