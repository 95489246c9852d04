// Example: ratekeeper in a Hono 4 app. This file runs unchanged on Node (@hono/node-server, see
// node.js), Cloudflare Workers (worker.js), Deno (deno.js) and Bun (bun.js): it imports only
// `hono` and `ratekeeper/hono`. The tests run it on each (packages/ratekeeper/test/adapter-hono.test.ts,
// packages/ratekeeper/test/edge-runtimes.test.ts); docs/edge.md explains the runtimes.
import { Hono } from "hono";
import { rateLimit } from "ratekeeper/hono";

/** The policy: plain spec objects (see examples/express/app.js). */
export const defaultOptions = {
  limits: [
    { algorithm: "sliding-window", limit: 100, window: "1m", name: "100-per-1m" },
    { algorithm: "gcra", limit: 2, window: "1s", burst: 4, name: "burst" },
  ],
  cost: { "GET /user": 1, "POST /user": 2 },
};

/**
 * The app: one global limiter and a few routes. Safe to call in a module's global scope on
 * Workers: the in-memory store starts no timer until its first request.
 */
export function createApp(options = defaultOptions) {
  const app = new Hono();
  app.use(rateLimit(options));
  app.get("/", (c) => c.text("hello"));
  app.get("/user", (c) => c.json({ id: 42 }));
  app.post("/user", (c) => c.json({ created: true }, 201));
  app.get("/status/:code", (c) => c.text("status", Number(c.req.param("code"))));
  return app;
}
