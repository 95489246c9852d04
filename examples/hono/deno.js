// The Hono example (app.js) on Deno 2, from this repository's node_modules:
// `deno run --allow-net --allow-env --allow-read examples/hono/deno.js`. The client address is
// Deno.serve's remoteAddr. docs/edge.md has the rest.
import { createApp } from "./app.js";

const app = createApp();
Deno.serve({ port: Number(Deno.env.get("PORT") ?? 3000), hostname: "127.0.0.1" }, app.fetch);
