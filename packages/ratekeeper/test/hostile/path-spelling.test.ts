/**
 * What a request is charged must not depend on a spelling the client chooses while the app
 * answers it the same way. `HEAD` runs the `GET` handler in Express, Fastify, Hono and most
 * routers (the body is only dropped), so a cost table's `"GET /search": 5` applies to `HEAD
 * /search` too, unless the table names HEAD itself: else the handler's work costs 1 in five. For
 * the same reason the key part "method" is `GET` for HEAD: else alternating the two doubles a
 * client's allowance.
 */
import { createServer } from "node:http";
import express from "express";
import { describe, expect, it } from "vitest";
import { rateLimit as expressLimit } from "../../src/adapters/express.js";
import { rateLimit as nodeLimit } from "../../src/adapters/node.js";
import { httpRequest, loopbackServers } from "../http-support.js";

const listen = loopbackServers();

function options(cost: Record<string, number>, costs: number[]) {
  return {
    limits: [{ algorithm: "fixed-window" as const, limit: 5, window: "1h" as const }],
    clock: () => 1_700_000_040_000,
    cost,
    onDecision: (e: { cost: number }) => costs.push(e.cost),
  };
}

describe("HEAD is charged as the GET it runs", () => {
  it("node:http: a GET entry prices HEAD", async () => {
    const costs: number[] = [];
    const limit = nodeLimit(options({ "GET /search": 5 }, costs));
    const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
    expect((await httpRequest(url, { method: "HEAD", path: "/search" })).status).toBe(200);
    expect((await httpRequest(url, { method: "HEAD", path: "/search" })).status).toBe(429);
    expect(costs).toEqual([5, 5]);
  });

  it("a HEAD entry wins over the GET one; a route-only entry still applies", async () => {
    const costs: number[] = [];
    const limit = nodeLimit(options({ "HEAD /cheap": 2, "GET /cheap": 4, "/other": 3 }, costs));
    const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
    await httpRequest(url, { method: "HEAD", path: "/cheap" });
    await httpRequest(url, { method: "HEAD", path: "/other" });
    expect(costs).toEqual([2, 3]);
  });

  it("Express: HEAD on a GET route costs the GET's price", async () => {
    const costs: number[] = [];
    const app = express();
    app.get("/search", expressLimit(options({ "GET /search": 5 }, costs) as never), (_req, res) => res.send("results"));
    const url = await listen(createServer(app));
    expect((await httpRequest(url, { method: "HEAD", path: "/search" })).status).toBe(200);
    expect((await httpRequest(url, { method: "HEAD", path: "/search" })).status).toBe(429);
    expect(costs).toEqual([5, 5]);
  });
});

describe('key part "method": HEAD is the GET it runs', () => {
  it("alternating HEAD and GET does not double a client's allowance", async () => {
    const keys: string[] = [];
    const limit = nodeLimit({
      limits: [{ algorithm: "fixed-window", limit: 1, window: "1h" }],
      clock: () => 1_700_000_040_000,
      key: ["ip", "method", "path"],
      onDecision: (e: { key: string }) => keys.push(e.key),
    });
    const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
    expect((await httpRequest(url, { method: "GET", path: "/search" })).status).toBe(200);
    expect((await httpRequest(url, { method: "HEAD", path: "/search" })).status).toBe(429);
    expect((await httpRequest(url, { method: "POST", path: "/search" })).status).toBe(200);
    expect(keys).toEqual(["127.0.0.1|GET|/search", "127.0.0.1|GET|/search", "127.0.0.1|POST|/search"]);
  });
});
