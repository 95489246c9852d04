/**
 * The `concurrency` option on Hono where there is no Node response to watch (Bun, Deno, Cloudflare
 * Workers, `app.request()`): a streamed body (server-sent events, a long download) is still in
 * flight after the handler has returned, and its lease must be held until the body has been read
 * to its end or cancelled (the client gone), as docs/concurrency.md says: "the lease goes back
 * when the response finishes or the client goes away". Run in-process with `app.request()`, the
 * same fetch-style path those runtimes take.
 */
import { Hono } from "hono";
import { streamText } from "hono/streaming";
import { describe, expect, it } from "vitest";
import { ConcurrencyLimiter } from "ratekeeper";
import { rateLimit } from "ratekeeper/hono";

/** An app whose `/stream` writes "a", waits for `finish()`, then writes "b". */
function streamingApp() {
  const pool = new ConcurrencyLimiter({ limit: 1, leaseMs: 60_000 });
  const app = new Hono();
  const gates: Array<() => void> = [];
  app.use(rateLimit({ concurrency: pool, getRemoteAddress: () => "203.0.113.9" }));
  app.get("/stream", (c) =>
    streamText(c, async (s) => {
      await s.write("a");
      await new Promise<void>((r) => gates.push(r));
      await s.write("b");
    }),
  );
  app.get("/plain", (c) => c.text("plain"));
  return { app, pool, finish: () => gates.splice(0).forEach((r) => r()) };
}

async function firstChunk(res: Response): Promise<{ reader: ReadableStreamDefaultReader<Uint8Array>; text: string }> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const { value } = await reader.read();
  return { reader, text: new TextDecoder().decode(value) };
}

describe("Hono (fetch-style runtimes): a streamed response holds its lease until its body ends", () => {
  it("a second request while the first streams is refused; once the body is read to its end, the slot is free", async () => {
    const { app, pool, finish } = streamingApp();
    const first = await app.request("/stream");
    expect(first.status).toBe(200);
    const { reader, text } = await firstChunk(first);
    expect(text).toBe("a");
    expect((await app.request("/plain")).status).toBe(429);
    finish();
    while (!(await reader.read()).done);
    await new Promise((r) => setTimeout(r, 0));
    expect((await pool.peek("203.0.113.9")).remaining).toBe(1);
    expect((await app.request("/plain")).status).toBe(200);
  });

  it("a body cancelled (the client gone) gives the slot back", async () => {
    const { app, pool, finish } = streamingApp();
    const { reader } = await firstChunk(await app.request("/stream"));
    await reader.cancel();
    await new Promise((r) => setTimeout(r, 0));
    expect((await pool.peek("203.0.113.9")).remaining).toBe(1);
    finish();
  });

  it("a plain body gives the slot back once read; a response without a body, when the handler returns", async () => {
    const { app, pool } = streamingApp();
    const plain = await app.request("/plain");
    expect(await plain.text()).toBe("plain");
    await new Promise((r) => setTimeout(r, 0));
    expect((await pool.peek("203.0.113.9")).remaining).toBe(1);
    expect((await app.request("/plain", { method: "HEAD" })).status).toBe(200);
    expect((await pool.peek("203.0.113.9")).remaining).toBe(1);
  });
});
