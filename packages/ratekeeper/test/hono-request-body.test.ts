/**
 * Request bodies and `ratekeeper/hono`. The middleware reads no request body itself (a cost
 * function is synchronous; only the response body is watched, for a lease); a `key` or `skip`
 * function may read one (`await c.req.json()`), and a hostile client can send a body cut short
 * (the connection closed mid-body), one that is not JSON, or one over Hono's `bodyLimit`. Each
 * must end as the app's own error does (reported to `onError`, answered 500, nothing charged:
 * never a pass), leave the server serving, and leave the body readable by the handler when the
 * key function read it whole. On @hono/node-server over real sockets.
 */
import net from "node:net";
import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { afterEach, expect, it } from "vitest";
import { RateLimiter } from "ratekeeper";
import { rateLimit } from "ratekeeper/hono";
import { until } from "../../../test-support/process.js";

const servers: ServerType[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

function start(withBodyLimit: boolean) {
  const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 100, window: "1h" });
  const errors: unknown[] = [];
  const keyCalls: string[] = [];
  const app = new Hono();
  if (withBodyLimit) app.use(bodyLimit({ maxSize: 1024 }));
  app.use(
    rateLimit({
      limiter,
      key: async (c) => {
        keyCalls.push(c.req.path);
        const body = await c.req.json<{ tenant?: string }>();
        return `tenant=${String(body.tenant)}`;
      },
      onError: (e) => errors.push(e),
    }),
  );
  app.post("/", async (c) => c.json({ seen: await c.req.json() }));
  return new Promise<{ port: number; limiter: RateLimiter; errors: unknown[]; keyCalls: string[] }>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) =>
      resolve({ port: info.port, limiter, errors, keyCalls }),
    );
    servers.push(s);
  });
}

const post = (port: number, body: string, headers: Record<string, string> = {}) =>
  fetch(`http://127.0.0.1:${port}/`, { method: "POST", body, headers: { "content-type": "application/json", ...headers } });

it("a body read by the key function is still the handler's; the tenant is charged once", async () => {
  const s = await start(false);
  const r = await post(s.port, JSON.stringify({ tenant: "t1", n: 1 }));
  expect(r.status).toBe(200);
  expect(await r.json()).toEqual({ seen: { tenant: "t1", n: 1 } });
  expect((await s.limiter.peek("tenant=t1")).remaining, "peek: what a cost-1 request would leave").toBe(98);
});

it("a body that is not JSON: 500, reported, nothing charged", async () => {
  const s = await start(false);
  const r = await post(s.port, "{not json");
  expect(r.status).toBe(500);
  expect(s.errors).toHaveLength(1);
  expect((await s.limiter.peek("tenant=undefined")).remaining, "untouched").toBe(99);
});

it("a body cut short (the client closes mid-body): reported once, nothing charged, the server goes on", async () => {
  const s = await start(false);
  const sock = net.connect(s.port, "127.0.0.1");
  await new Promise<void>((r) => sock.once("connect", () => r()));
  sock.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + '{"tenant":"t2"');
  await until(() => s.keyCalls.length === 1, "the key function reading the body", 200, 10);
  sock.destroy();
  await until(() => s.errors.length === 1, "the cut body reported", 200, 10);
  expect((await s.limiter.peek("tenant=t2")).remaining, "untouched").toBe(99);
  const r = await post(s.port, JSON.stringify({ tenant: "t3" }));
  expect(r.status).toBe(200);
  expect(s.errors).toHaveLength(1);
});

it("behind bodyLimit: a chunked body over it is refused 413 before the key function reads it", async () => {
  const s = await start(true);
  const big = JSON.stringify({ tenant: "t4", pad: "x".repeat(4096) });
  const chunks = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new TextEncoder().encode(big));
      c.close();
    },
  });
  const r = await fetch(`http://127.0.0.1:${s.port}/`, {
    method: "POST",
    body: chunks,
    headers: { "content-type": "application/json" },
    duplex: "half",
  });
  expect(r.status).toBe(413);
  expect(s.keyCalls).toHaveLength(0);
  expect((await s.limiter.peek("tenant=t4")).remaining, "untouched").toBe(99);
});
