/**
 * A body over the service's cap (`--max-body`) is answered 413, and the client sees that answer.
 *
 * Answering at once and closing the connection while the client is still sending makes the
 * client's next write fail (EPIPE, or a reset that discards the answer it had not yet read):
 * `fetch` then rejects with "fetch failed" instead of giving the 413. So the service reads and
 * discards what is left of a moderately larger body (up to `--max-body` + 8 MiB) before it answers;
 * past that it answers at once and closes, so a client cannot make it read without end.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveRules, type InProcessService } from "../in-process.js";

const MAX = 1024;
let svc: InProcessService;
let base: string;

beforeAll(async () => {
  svc = await serveRules("domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n", {
    maxBodyBytes: MAX,
  });
  base = `http://127.0.0.1:${svc.httpPort}`;
});

afterAll(async () => {
  await svc?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Sends `head`, then `body` in `parts` writes `pauseMs` apart, whatever comes back meanwhile, as a
 * client that sends its whole request before it reads the answer (HTTP/1.1 allows it; many
 * clients do). Resolves with what it read and the first error (a write into a closed
 * connection fails with EPIPE or ECONNRESET, and a reset can discard an answer not yet read).
 */
function sendWholeThenRead(head: string, body: Buffer, parts: number, pauseMs: number): Promise<{ text: string; error?: string }> {
  return new Promise((resolve) => {
    const sock = net.connect({ port: svc.httpPort, host: "127.0.0.1", allowHalfOpen: true });
    let text = "";
    let error: string | undefined;
    sock.on("data", (c: Buffer) => (text += c.toString("latin1")));
    sock.on("error", (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    sock.on("close", () => resolve({ text, error }));
    void (async () => {
      sock.write(head);
      const step = Math.ceil(body.length / parts);
      for (let i = 0; i < body.length && error === undefined; i += step) {
        await sleep(pauseMs);
        sock.write(body.subarray(i, i + step));
      }
      if (error === undefined) sock.end();
    })();
  });
}

const filler = (n: number) => Buffer.alloc(n, 120);

describe("a body over --max-body", () => {
  it("with a Content-Length over the cap, sent whole before the answer is read: the client gets the 413, no reset", async () => {
    const body = filler(256 * 1024);
    const head = `POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const r = await sendWholeThenRead(head, body, 4, 100);
    expect(r.error).toBeUndefined();
    expect(r.text).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.text).toMatch(/"error":"payload_too_large","message":"body: at most 1024 bytes/);
  });

  it("chunked, no length given: the same", async () => {
    const chunk = filler(64 * 1024);
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")]);
    const head = "POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    const r = await sendWholeThenRead(head, Buffer.concat([frame, frame, frame, Buffer.from("0\r\n\r\n")]), 4, 100);
    expect(r.error).toBeUndefined();
    expect(r.text).toMatch(/^HTTP\/1\.1 413 /);
  });

  it("fetch of a 2 MiB body: a 413, never 'fetch failed' (20 times)", async () => {
    const huge = JSON.stringify({ domain: "d", descriptors: [{ k: "x".repeat(2 * 1024 * 1024) }] });
    const got: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await fetch(`${base}/v1/check`, { method: "POST", body: huge }).catch((e: Error) => e);
      got.push(r instanceof Error ? `${r.message}: ${String((r.cause as Error | undefined)?.message)}` : String(r.status));
      if (!(r instanceof Error)) await r.text();
    }
    expect(got).toEqual(Array(20).fill("413"));
  });

  it("far over the cap (more than --max-body + 8 MiB declared): answered at once and closed, nothing read", async () => {
    const head = `POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: ${1024 ** 3}\r\n\r\n`;
    const sock = net.connect(svc.httpPort, "127.0.0.1");
    let text = "";
    sock.on("data", (c: Buffer) => (text += c.toString("latin1")));
    sock.on("error", () => {});
    sock.write(head);
    await new Promise<void>((resolve) => sock.once("close", () => resolve()));
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text).toMatch(/connection: close/i);
  });

  it("streamed past --max-body + 8 MiB: answered and closed without waiting for the end", async () => {
    const sock = net.connect(svc.httpPort, "127.0.0.1");
    let text = "";
    let closed = false;
    sock.on("data", (c: Buffer) => (text += c.toString("latin1")));
    sock.on("error", () => {});
    sock.on("close", () => (closed = true));
    sock.write("POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    const chunk = Buffer.alloc(64 * 1024, 120);
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")]);
    // 9 MiB and a little more, never ending the body: the answer must come anyway.
    for (let sent = 0; sent <= 9 * 1024 * 1024 + MAX && !closed; sent += chunk.length) {
      if (!sock.write(frame)) await new Promise((r) => sock.once("drain", r).once("close", r));
    }
    for (let i = 0; i < 100 && !closed; i++) await sleep(50);
    expect(closed).toBe(true);
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
  });
});
