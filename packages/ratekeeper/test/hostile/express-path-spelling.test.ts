/**
 * Express routes `/login`, `/LOGIN` and `/login/` to one handler by default ("case sensitive
 * routing" and "strict routing" are off), so the key's `path` part, the `route` part where it
 * falls back to the path (app-level middleware), and cost tables must not tell them apart: else a
 * client multiplies its allowance by respelling the path (2^5 x 2 spellings of `/login`) and a
 * cost table's price is skipped. With those settings on, the spellings are different routes, and
 * keep different keys.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { afterEach, describe, expect, it } from "vitest";
import { rateLimit as expressLimit } from "../../src/adapters/express.js";
import { httpRequest } from "../http-support.js";

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function app(options: Record<string, unknown>, setup: (a: express.Express) => void = () => {}) {
  const seen: { key: string; cost: number }[] = [];
  const a = express();
  setup(a);
  a.use(
    expressLimit({
      limits: [{ algorithm: "fixed-window", limit: 3, window: "1h" }],
      clock: () => 1_700_000_040_000,
      onDecision: (e: { key: string; cost: number }) => seen.push({ key: e.key, cost: e.cost }),
      ...options,
    } as never),
  );
  a.get("/login", (_req, res) => res.send("ok"));
  a.use(
    "/api",
    express.Router().get("/users", (_req, res) => res.send("ok")),
  );
  const server = createServer(a);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

describe("Express: spellings the router treats as one path are one key and one price", () => {
  it('key ["ip", "path"]: /login, /LOGIN, /Login/ share one allowance', async () => {
    const s = await app({ key: ["ip", "path"] });
    for (const p of ["/login", "/LOGIN", "/Login/"]) expect((await httpRequest(s.url, { path: p })).status).toBe(200);
    expect((await httpRequest(s.url, { path: "/login/" })).status).toBe(429);
    expect(new Set(s.seen.map((e) => e.key))).toEqual(new Set(["127.0.0.1|/login"]));
  });

  it("a cost table entry prices every spelling, mounted routers included", async () => {
    const s = await app({ cost: { "GET /login": 3, "/api/users": 2 } });
    await httpRequest(s.url, { path: "/LOGIN/" });
    await httpRequest(s.url, { path: "/API/Users/" });
    expect(s.seen.map((e) => e.cost)).toEqual([3, 2]);
  });

  it("a cost-table entry written in mixed case or with a trailing slash still prices the route", async () => {
    const s = await app({ limits: [{ algorithm: "fixed-window", limit: 100, window: "1h" }], cost: { "GET /Login/": 3, "/API/Users": 2 } });
    for (const p of ["/login", "/LOGIN", "/api/users/"]) await httpRequest(s.url, { path: p });
    expect(s.seen.map((e) => e.cost)).toEqual([3, 3, 2]);
  });

  it('"case sensitive routing" and "strict routing" on: the spellings stay apart', async () => {
    const s = await app({ key: ["ip", "path"] }, (a) => {
      a.set("case sensitive routing", true);
      a.set("strict routing", true);
    });
    for (const p of ["/login", "/LOGIN", "/login/"]) await httpRequest(s.url, { path: p });
    expect(s.seen.map((e) => e.key)).toEqual(["127.0.0.1|/login", "127.0.0.1|/LOGIN", "127.0.0.1|/login/"]);
  });
});
