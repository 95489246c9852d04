// Example: ratekeeper in a Fastify 5 app.  Run: npm run build && node examples/fastify/app.js
// The tests (packages/ratekeeper/test/adapter-fastify.test.ts) start this same app.
import { pathToFileURL } from "node:url";
import Fastify from "fastify";
import { rateLimitPlugin } from "ratekeeper/fastify";

/** The policy: plain spec objects (see examples/express/app.js). */
export const defaultOptions = {
  limits: [
    { algorithm: "sliding-window", limit: 100, window: "1m", name: "100-per-1m" },
    { algorithm: "gcra", limit: 2, window: "1s", burst: 4, name: "burst" },
  ],
  cost: { "GET /user": 1, "POST /user": 2 },
};

/** The app: the plugin (it applies to the whole instance) and a few routes. */
export async function createApp(options = defaultOptions) {
  const app = Fastify();
  await app.register(rateLimitPlugin, options);
  app.get("/", async () => "hello");
  app.get("/user", async () => ({ id: 42 }));
  app.post("/user", async (_req, reply) => reply.code(201).send({ created: true }));
  app.get("/status/:code", async (req, reply) => reply.code(Number(req.params.code)).send("status"));
  return app;
}

/** Starts the app; `port: 0` picks a free port. Resolves `{ url, close, app }`. */
export async function start(options = defaultOptions, { port = 0, host = "127.0.0.1" } = {}) {
  const app = await createApp(options);
  await app.listen({ port, host });
  const addr = app.server.address();
  const h = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return { app, url: `http://${h}:${addr.port}`, close: () => app.close() };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { url } = await start(defaultOptions, { port: Number(process.env.PORT ?? 3000) });
  console.log(`fastify example listening on ${url}`);
}
