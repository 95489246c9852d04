import type { Context } from "hono";
import { describe, expect, it } from "vitest";
import { createApp } from "../../../examples/hono/app.js";
import { start } from "../../../examples/hono/node.js";
import { realDriver, type Driver, type Reply } from "./http-support.js";
import { behaviourTable, redisBehaviourTable } from "./http-table.js";

const pathOf = (c: unknown) => (c as Context).req.path;

/**
 * app.request(): in-process, no socket. The peer address goes in through the same bindings
 * @hono/node-server provides (`env.incoming.socket.remoteAddress`), which the adapter reads.
 */
const inProcess: Driver = {
  name: "hono (app.request)",
  real: false,
  pathOf,
  start(options) {
    const app = createApp(options);
    const env = { incoming: { socket: { remoteAddress: "127.0.0.1" } } };
    return Promise.resolve({
      async request(r = {}): Promise<Reply> {
        const res = await app.request(r.path ?? "/", { method: r.method ?? "GET", headers: r.headers }, env);
        const headers: Record<string, string> = {};
        res.headers.forEach((v, k) => (headers[k] = v));
        return { status: res.status, headers, body: await res.text() };
      },
      close: () => Promise.resolve(),
    });
  },
};

describe("Hono adapter (examples/hono)", () => {
  const real = realDriver("hono", start, pathOf);
  behaviourTable(real);
  behaviourTable(inProcess);
  redisBehaviourTable([real, inProcess]);
});

describe("Hono specifics", () => {
  it("a custom handler builds the refusal (headers added to it); getRemoteAddress for other runtimes", async () => {
    const { Hono } = await import("hono");
    const { rateLimit } = await import("ratekeeper/hono");
    const app = new Hono();
    const keys: string[] = [];
    app.use(
      rateLimit({
        limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }],
        clock: () => 1_700_000_040_000,
        getRemoteAddress: (c) => c.req.header("x-test-peer"),
        onDecision: (e) => keys.push(e.key),
        handler: (c, result) => c.json({ custom: result.status }, 429),
      }),
    );
    app.get("/", (c) => c.text("ok"));
    expect((await app.request("/", { headers: { "x-test-peer": "::ffff:198.51.100.7" } })).status).toBe(200);
    const r = await app.request("/", { headers: { "x-test-peer": "198.51.100.7" } });
    expect(r.status).toBe(429);
    expect(await r.json()).toEqual({ custom: 429 });
    expect(r.headers.get("retry-after")).toBe("60");
    expect(r.headers.get("ratelimit")).toBe('"1-per-1m";r=0;t=60');
    expect(keys).toEqual(["198.51.100.7", "198.51.100.7"]);
  });

  it("a custom handler's Response with immutable headers (Response.redirect, a fetch() answer) still gets the limit headers", async () => {
    const { Hono } = await import("hono");
    const { rateLimit } = await import("ratekeeper/hono");
    const app = new Hono();
    app.use(
      rateLimit({
        limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }],
        clock: () => 1_700_000_040_000,
        getRemoteAddress: () => "198.51.100.7",
        handler: () => Response.redirect("https://example.com/slow-down", 302),
      }),
    );
    app.get("/", (c) => c.text("ok"));
    expect((await app.request("/")).status).toBe(200);
    const r = await app.request("/");
    expect([r.status, r.headers.get("location"), r.headers.get("retry-after")]).toEqual([302, "https://example.com/slow-down", "60"]);
  });
});
