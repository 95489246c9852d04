// The Hono example (app.js) on Cloudflare Workers, with or without the nodejs_compat flag:
// `npx wrangler dev examples/hono/worker.js` (wrangler bundles app.js, hono and ratekeeper/hono).
// The client address is the CF-Connecting-IP header Cloudflare sets. docs/edge.md has the rest.
import { createApp } from "./app.js";

export default createApp();
