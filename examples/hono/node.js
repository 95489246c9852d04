// The Hono example (app.js) on Node with @hono/node-server.  Run: npm run build && node examples/hono/node.js
// The tests (packages/ratekeeper/test/adapter-hono.test.ts) start this same server.
import { pathToFileURL } from "node:url";
import { serve } from "@hono/node-server";
import { createApp, defaultOptions } from "./app.js";

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
