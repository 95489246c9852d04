// The Hono example (app.js) on Bun: `bun examples/hono/bun.js`. The client address is
// server.requestIP(). docs/edge.md has the rest.
import { createApp } from "./app.js";

const app = createApp();
const server = Bun.serve({ port: Number(process.env.PORT ?? 3000), hostname: "127.0.0.1", fetch: app.fetch });
console.log(`hono example listening on ${server.url}`);
