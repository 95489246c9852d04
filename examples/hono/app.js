// Example: ratekeeper in a Hono 4 app on @hono/node-server.  Run: npm run build && node examples/hono/app.js
// The tests (packages/ratekeeper/test/adapter-hono.test.ts) start this same app, and also call app.request() in-process.
import { pathToFileURL } from "node:url";
import { serve } from "@hono/node-server";
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

/** The app: one global limiter and a few routes. */
export function createApp(options = defaultOptions) {
  const app = new Hono();
  app.use(rateLimit(options));
  app.get("/", (c) => c.text("hello"));
  app.get("/user", (c) => c.json({ id: 42 }));
  app.post("/user", (c) => c.json({ created: true }, 201));
  app.get("/status/:code", (c) => c.text("status", Number(c.req.param("code"))));
  return app;
}

/** Starts the app on @hono/node-server; `port: 0` picks a free port. Resolves `{ url, close, app }`. */
export async function start(options = defaultOptions, { port = 0, host = "127.0.0.1" } = {}) {
  const app = createApp(options);
  const server = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port, hostname: host }, () => resolve(s));
  });
  const addr = server.address();
  const h = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return {
    app,
    url: `http://${h}:${addr.port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { url } = await start(defaultOptions, { port: Number(process.env.PORT ?? 3000) });
  console.log(`hono example listening on ${url}`);
}
