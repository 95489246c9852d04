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

  it("reads the platform's record of the client on AWS Lambda, Lambda@Edge and Netlify (never a header)", async () => {
    // hono/aws-lambda's handle(): API Gateway REST (v1), HTTP API and function URLs (v2).
    const v1 = { event: {}, requestContext: { identity: { sourceIp: "203.0.113.10" } }, lambdaContext: {} };
    const v2 = { event: {}, requestContext: { http: { method: "GET", sourceIp: "2001:db8::7" } }, lambdaContext: {} };
    expect(await seen(v1)).toBe("203.0.113.10");
    expect(await seen(v2)).toBe("2001:db8::7");
    // An ALB event has only X-Forwarded-For, which the client can write: no address.
    expect(await seen({ event: {}, requestContext: { elb: { targetGroupArn: "arn" } } }, { "x-forwarded-for": "1.2.3.4" })).toBeUndefined();
    // hono/lambda-edge's handle(): CloudFront's record of the viewer.
    const edge = { event: { Records: [{ cf: { request: { clientIp: "198.51.100.20" } } }] }, context: {}, callback: () => undefined };
    expect(await seen(edge)).toBe("198.51.100.20");
    // hono/netlify's handle(): Netlify's context.
    expect(await seen({ context: { ip: "192.0.2.44" } })).toBe("192.0.2.44");
    // Shapes that only look alike give nothing.
    expect(await seen({ requestContext: { identity: { sourceIp: 5 } } })).toBeUndefined();
    expect(await seen({ event: { Records: [] } })).toBeUndefined();
    expect(await seen({ context: {} })).toBeUndefined();
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
