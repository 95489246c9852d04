// Example: ratekeeper on a plain node:http server.  Run: npm run build && node examples/node/app.js
// The tests (packages/ratekeeper/test/adapter-node.test.ts) start this same app.
import { once } from "node:events";
import http from "node:http";
import { pathToFileURL } from "node:url";
import { withRateLimit } from "ratekeeper/node";

/** The policy: plain spec objects (see examples/express/app.js). */
export const defaultOptions = {
  limits: [
    { algorithm: "sliding-window", limit: 100, window: "1m", name: "100-per-1m" },
    { algorithm: "gcra", limit: 2, window: "1s", burst: 4, name: "burst" },
  ],
  cost: { "GET /user": 1, "POST /user": 2 },
};

/** The request listener, behind the limiter. */
function routes(req, res) {
  const path = (req.url ?? "/").split("?")[0];
  const status = /^\/status\/(\d{3})$/.exec(path);
  if (path === "/user") {
    res.writeHead(req.method === "POST" ? 201 : 200, { "Content-Type": "application/json" });
    res.end(JSON.stringify(req.method === "POST" ? { created: true } : { id: 42 }));
  } else if (status) {
    res.writeHead(Number(status[1])).end("status");
  } else {
    res.end("hello");
  }
}

/** The server (not listening yet). */
export function createApp(options = defaultOptions) {
  return http.createServer(withRateLimit(options, routes));
}

/** Starts the server; `port: 0` picks a free port. Resolves `{ url, close }`. */
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
  console.log(`node:http example listening on ${url}`);
}
