// Example: ratekeeper in an Express 5 app.  Run: npm run build && node examples/express/app.js
// The tests (packages/ratekeeper/test/adapter-express.test.ts) start this same app.
import { once } from "node:events";
import { pathToFileURL } from "node:url";
import express from "express";
import { rateLimit } from "ratekeeper/express";

/**
 * The policy: plain spec objects, as in a JSON or YAML file the decision service also reads.
 * Two rules on one key (100 per minute AND 2 per second, all-or-nothing), and costs per route.
 */
export const defaultOptions = {
  limits: [
    { algorithm: "sliding-window", limit: 100, window: "1m", name: "100-per-1m" },
    { algorithm: "gcra", limit: 2, window: "1s", burst: 4, name: "burst" },
  ],
  cost: { "GET /user": 1, "POST /user": 2 },
};

/** The app: one global limiter and a few routes. */
export function createApp(options = defaultOptions) {
  const app = express();
  app.use(rateLimit(options));
  app.get("/", (_req, res) => res.send("hello"));
  app.get("/user", (_req, res) => res.json({ id: 42 }));
  app.post("/user", (_req, res) => res.status(201).json({ created: true }));
  app.get("/status/:code", (req, res) => res.status(Number(req.params.code)).send("status"));
  return app;
}

/** Starts the app; `port: 0` picks a free port. Resolves `{ url, close }`. */
export async function start(options = defaultOptions, { port = 0, host = "127.0.0.1" } = {}) {
  const server = createApp(options).listen(port, host);
  await once(server, "listening");
  const addr = server.address();
  const h = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${h}:${addr.port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { url } = await start(defaultOptions, { port: Number(process.env.PORT ?? 3000) });
  console.log(`express example listening on ${url}`);
}
