/**
 * The request target as the client writes it is not the path the app routes. A server must accept
 * the absolute form (`POST http://host/login HTTP/1.1`, RFC 9112 section 3.2.2), which node passes
 * on as written in `req.url`; a router that reads `new URL(req.url, base)`, and Fastify's, routes
 * it to `/login`. Fastify's router also decodes percent-encoding (`/%6Cogin` is `/login`). Keys
 * and cost tables must see the path the app routes: else a client skips a cost table's price, or
 * multiplies its allowance, by respelling the target (3^5 spellings of `/login` in hex escapes).
 */
import { createServer } from "node:http";
import { connect } from "node:net";
import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { rateLimitHook } from "../../src/adapters/fastify.js";
import { rateLimit as nodeLimit } from "../../src/adapters/node.js";
import { loopbackServers } from "../http-support.js";

const listen = loopbackServers();

/** Sends `POST <target>` as written, over a raw socket; resolves with the status. */
function post(url: string, target: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () =>
      s.write(`POST ${target} HTTP/1.1\r\nHost: app.example\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`),
    );
    let reply = "";
    s.on("data", (d: Buffer) => (reply += d.toString("latin1")));
    s.on("error", reject);
    s.on("close", () => resolve(Number(reply.split(" ")[1])));
  });
}

function options(seen: { key: string; cost: number }[], extra: Record<string, unknown>) {
  return {
    limits: [{ algorithm: "fixed-window" as const, limit: 10, window: "1h" as const }],
    clock: () => 1_700_000_040_000,
    onDecision: (e: { key: string; cost: number }) => seen.push({ key: e.key, cost: e.cost }),
    ...extra,
  };
}

describe("the request target's spelling", () => {
  it("node:http: the absolute form pays the cost table's price and shares the path's key", async () => {
    const seen: { key: string; cost: number }[] = [];
    const limit = nodeLimit(options(seen, { cost: { "POST /login": 10 }, key: ["ip", "path"] }));
    const url = await listen(
      createServer((req, res) => {
        void limit(req, res).then((ok) => ok && res.end(new URL(req.url ?? "/", "http://app.example").pathname));
      }),
    );
    expect(await post(url, "/login")).toBe(200);
    expect(await post(url, "http://app.example/login")).toBe(429);
    expect(await post(url, "http://app.example")).toBe(200);
    expect(seen).toEqual([
      { key: "127.0.0.1|/login", cost: 10 },
      { key: "127.0.0.1|/login", cost: 10 },
      { key: "127.0.0.1|/", cost: 1 },
    ]);
  });

  it("Fastify: the absolute form and percent-encoded spellings share the path's key", async () => {
    const seen: { key: string; cost: number }[] = [];
    const app = Fastify();
    app.addHook("onRequest", rateLimitHook(options(seen, { key: ["ip", "path"] })));
    app.post("/login", async () => "in");
    await app.listen({ port: 0, host: "127.0.0.1" });
    try {
      const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
      for (const target of ["/login", "/%6Cogin", "/l%6fgin", "http://app.example/login", "/login?next=%2F"]) {
        expect([target, await post(url, target)]).toEqual([target, 200]);
      }
      expect(new Set(seen.map((e) => e.key))).toEqual(new Set(["127.0.0.1|/login"]));
    } finally {
      await app.close();
    }
  });

  it("Fastify's router options (ignoreTrailingSlash, caseSensitive: false, ignoreDuplicateSlashes, useSemicolonDelimiter): one route, one key", async () => {
    for (const config of [
      { routerOptions: { ignoreTrailingSlash: true, caseSensitive: false, ignoreDuplicateSlashes: true, useSemicolonDelimiter: true } },
      { ignoreTrailingSlash: true, caseSensitive: false, ignoreDuplicateSlashes: true, useSemicolonDelimiter: true },
    ]) {
      const seen: { key: string; cost: number }[] = [];
      const app = Fastify(config as never);
      app.addHook("onRequest", rateLimitHook(options(seen, { key: ["ip", "path"] })));
      app.post("/login", async () => "in");
      await app.listen({ port: 0, host: "127.0.0.1" });
      try {
        const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
        for (const target of ["/login", "/LOGIN/", "//Login", "/login;jsessionid=1"]) {
          expect([target, await post(url, target)]).toEqual([target, 200]);
        }
        expect(new Set(seen.map((e) => e.key))).toEqual(new Set(["127.0.0.1|/login"]));
      } finally {
        await app.close();
      }
    }
  });
});
