/**
 * Where `ratekeeper/hono` finds the client's address on each runtime by default
 * (runtimeRemoteAddress): @hono/node-server's socket, Deno.serve's remoteAddr, Bun's
 * server.requestIP(), Cloudflare's CF-Connecting-IP header (on workerd only: anywhere else that
 * header is whatever the client wrote). The runtimes themselves are in edge-runtimes.test.ts.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { rateLimit, runtimeRemoteAddress } from "../src/adapters/hono.js";

/** The address the default reader sees for a request served with bindings `env`. */
async function seen(env: unknown, headers: Record<string, string> = {}): Promise<string | undefined> {
  const app = new Hono();
  let got: string | undefined = "not called";
  app.get("/", (c) => {
    got = runtimeRemoteAddress(c);
    return c.text("ok");
  });
  await app.request("/", { headers }, env);
  return got;
}

describe("runtimeRemoteAddress", () => {
  it("reads each runtime's own report of the peer", async () => {
    expect(await seen({ incoming: { socket: { remoteAddress: "::ffff:10.0.0.1" } } })).toBe("::ffff:10.0.0.1");
    expect(await seen({ remoteAddr: { transport: "tcp", hostname: "203.0.113.9", port: 5000 } })).toBe("203.0.113.9");
    const bun = { requestIP: (r: Request) => (r instanceof Request ? { address: "198.51.100.7", family: "IPv4", port: 1 } : null) };
    expect(await seen(bun)).toBe("198.51.100.7");
    expect(await seen({ requestIP: () => null })).toBeUndefined();
  });

  it("never believes CF-Connecting-IP outside Cloudflare Workers (a client can send it)", async () => {
    expect(await seen(undefined, { "cf-connecting-ip": "1.2.3.4" })).toBeUndefined();
    expect(await seen({ incoming: { socket: { remoteAddress: "10.0.0.1" } } }, { "cf-connecting-ip": "1.2.3.4" })).toBe("10.0.0.1");
  });

  it("with no address the middleware refuses (noAddress: deny), never one shared bucket", async () => {
    const app = new Hono();
    app.use(rateLimit({ limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }] }));
    app.get("/", (c) => c.text("ok"));
    expect((await app.request("/", { headers: { "cf-connecting-ip": "1.2.3.4" } })).status).toBe(403);
  });
});
