import type { Request } from "express";
import { describe, expect, it } from "vitest";
import { start } from "../../../examples/express/app.js";
import { httpRequest, realDriver } from "./http-support.js";
import { behaviourTable, redisBehaviourTable } from "./http-table.js";

const driver = realDriver("express", start, (req) => (req as Request).path);

describe("Express adapter (examples/express over real HTTP)", () => {
  behaviourTable(driver);
  redisBehaviourTable([driver]);
});

describe("Express specifics", () => {
  it("a custom handler answers the refusal; the limit headers are already set; route-level middleware keys by route", async () => {
    const express = (await import("express")).default;
    const { rateLimit } = await import("ratekeeper/express");
    const app = express();
    const keys: string[] = [];
    const limit = rateLimit({
      limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }],
      clock: () => 1_700_000_040_000,
      key: "route",
      onDecision: (e) => keys.push(e.key),
      handler: (_req, res, _next, result) => {
        res.status(result.status).json({ error: "slow down", retryAfter: result.problem?.["retry-after"] });
      },
    });
    app.get("/items/:id", limit, (_req, res) => res.send("item"));
    const server = app.listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      expect((await httpRequest(url, { path: "/items/1" })).status).toBe(200);
      const r = await httpRequest(url, { path: "/items/2" });
      expect(r.status).toBe(429);
      expect(JSON.parse(r.body)).toEqual({ error: "slow down", retryAfter: 60 });
      expect(r.headers["ratelimit"]).toBe('"1-per-1m";r=0;t=60');
      expect(r.headers["retry-after"]).toBe("60");
      expect(keys).toEqual(["/items/:id", "/items/:id"]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
