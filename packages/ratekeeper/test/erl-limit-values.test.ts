/**
 * express-rate-limit's `limit` as a function: ratekeeper keeps counters per limit value (one
 * limiter each). A function whose answers take many values (a quota per user, or one read from
 * the request) must not keep a limiter per value for good, and counters must survive the
 * limiters that are let go (the counters live in the store; a limiter made again finds them).
 */
import { spawnSync } from "node:child_process";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import express, { type Request } from "express";
import { expect, it } from "vitest";
import { rateLimit } from "../src/adapters/express.js";
import { httpRequest, loopbackServers } from "./http-support.js";

const ADAPTER = fileURLToPath(new URL("../src/adapters/express.ts", import.meta.url));
const INDEX = fileURLToPath(new URL("../src/index.ts", import.meta.url));
const TSX = fileURLToPath(new URL("../../../node_modules/tsx/dist/esm/index.mjs", import.meta.url));

const listen = loopbackServers();

it("6,000 distinct limit values (read from a request header) leave no limiter each once their keys expired", () => {
  const script = `
    const { rateLimit } = await import(${JSON.stringify(ADAPTER)});
    const { MemoryStore } = await import(${JSON.stringify(INDEX)});
    const express = (await import("express")).default;
    const http = await import("node:http");
    let now = 1_700_000_000_000;
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const app = express();
    app.use(rateLimit({ limit: (req) => Number(req.headers["x-n"]), store, clock: () => now }));
    app.get("/", (_req, res) => res.end("ok"));
    const server = app.listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    const get = (n) => new Promise((ok, fail) =>
      http.get({ port: server.address().port, host: "127.0.0.1", path: "/", agent, headers: { "x-n": String(n) } }, (r) => { r.resume(); r.on("end", ok); }).on("error", fail));
    const send = async (from, to) => { for (let i = from; i < to; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => get(i + j))); };
    const heap = async () => { for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 10)); } return process.memoryUsage().heapUsed; };
    await send(1, 1_001); // warm-up
    now += 3_600_000; store.sweep(now);
    const before = await heap();
    await send(1_001, 7_001);
    now += 3_600_000; store.sweep(now);
    const after = await heap();
    server.close(); agent.destroy();
    console.log(JSON.stringify({ before, after }));
  `;
  const r = spawnSync(process.execPath, ["--expose-gc", "--import", TSX, "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 120_000,
  });
  expect(r.status, r.stderr).toBe(0);
  const { before, after } = JSON.parse(r.stdout.trim().split("\n").pop() as string) as { before: number; after: number };
  // Kept for good, each limit value took ~6 KB: 6,000 of them ~36 MB.
  expect(after - before, `heap grew ${((after - before) / 1e6).toFixed(1)} MB`).toBeLessThan(6 * 1024 * 1024);
}, 150_000);

it("a client's count, resetKey and getKey hold across many other limit values", async () => {
  const app = express();
  const limiter = rateLimit({ limit: (req: Request) => Number(req.query.n), keyGenerator: (req: Request) => req.query.who as string });
  app.use(limiter);
  app.get("/", (_req, res) => res.end("ok"));
  const url = await listen(createServer(app));
  const status = async (who: string, n: number) => (await httpRequest(url, { path: `/?who=${who}&n=${n}` })).status;
  expect(await status("a", 2)).toBe(200);
  for (let n = 3; n < 600; n++) await status(`other${n}`, n);
  expect(await limiter.getKey("a")).toMatchObject({ totalHits: 1 });
  expect(await status("a", 2)).toBe(200);
  expect(await status("a", 2)).toBe(429);
  await limiter.resetKey("a");
  expect(await limiter.getKey("a")).toBeUndefined();
  expect(await status("a", 2)).toBe(200);
}, 60_000);
