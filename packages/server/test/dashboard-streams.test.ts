/**
 * The dashboard's event streams (`/dashboard/api/events`) against clients that misbehave: one
 * that leaves while its first state is being built must not keep a slot (16 such, and no
 * dashboard could stream again), and one that stops reading must not make the server buffer
 * every frame for it without end (the dashboard is open to anyone when no admin token is set).
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { EventStreams, MAX_EVENT_CLIENTS } from "../src/dashboard/events.js";
import type { StateBuilder } from "../src/dashboard/state.js";
import { createLogger } from "../src/log.js";

/** A tick source the test fires by hand. */
class Ticks {
  private readonly listeners = new Set<() => void>();
  onTick(l: () => void): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
  fire(): void {
    for (const l of this.listeners) l();
  }
}

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A server answering every request with the event stream; `opened` holds each server-side response. */
async function serve(builder: Pick<StateBuilder, "json">, ticks: Ticks) {
  const streams = new EventStreams(builder as StateBuilder, ticks, createLogger("silent"));
  const opened: ServerResponse[] = [];
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    opened.push(res);
    void streams.open(req, res);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as AddressInfo).port, opened, streams };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("dashboard event streams", () => {
  it("a client that leaves while its first state is built keeps no slot", async () => {
    const slow = { json: async () => (await sleep(100), JSON.stringify({ version: 1 })) };
    const { port } = await serve(slow, new Ticks());
    for (let i = 0; i < MAX_EVENT_CLIENTS; i++) {
      const req = http.get({ host: "127.0.0.1", port, path: "/" });
      req.on("error", () => undefined);
      await sleep(10);
      req.destroy(); // gone before the state is ready
    }
    await sleep(300);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.get({ host: "127.0.0.1", port, path: "/" }, (res) => {
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      req.on("error", reject);
    });
    expect(status, "every slot held by a client long gone").toBe(200);
  });

  it("HEAD is answered with the stream's headers at once and holds no slot", async () => {
    // Before, a HEAD was opened as a stream: no headers were ever sent (HEAD writes no body, and
    // the headers waited for one) and the slot was held for as long as the client stayed.
    const { port } = await serve({ json: async () => JSON.stringify({ version: 1 }) }, new Ticks());
    const agent = new http.Agent({ keepAlive: true });
    const head = () =>
      new Promise<{ status: number; type: string | undefined }>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port, path: "/", method: "HEAD", agent }, (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode ?? 0, type: res.headers["content-type"] }));
        });
        req.setTimeout(2_000, () => req.destroy(new Error("no answer to HEAD")));
        req.on("error", reject);
        req.end();
      });
    for (let i = 0; i < MAX_EVENT_CLIENTS + 2; i++) expect(await head()).toEqual({ status: 200, type: "text/event-stream" });
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.get({ host: "127.0.0.1", port, path: "/" }, (res) => {
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      req.on("error", reject);
    });
    expect(status, "slots held by HEAD clients still connected").toBe(200);
    agent.destroy();
  });

  it("a client that stops reading is let go once a bounded backlog is waiting for it, not buffered for without end", async () => {
    const big = { version: 1, pad: "x".repeat(256 * 1024) };
    const ticks = new Ticks();
    const { port, opened } = await serve({ json: async () => JSON.stringify(big) }, ticks);
    const socket = await new Promise<import("node:net").Socket>((resolve) => {
      const req = http.get({ host: "127.0.0.1", port, path: "/" }, (res) => {
        res.pause(); // reads nothing more
        resolve(req.socket as import("node:net").Socket);
      });
      req.on("error", () => undefined);
    });
    socket.pause();
    let most = 0;
    for (let i = 0; i < 200; i++) {
      ticks.fire();
      await sleep(2);
      most = Math.max(most, opened[0]?.writableLength ?? 0);
    }
    // 200 frames of 256 KiB: ~50 MB queued for a client that reads nothing, before.
    expect(most, `${(most / 1e6).toFixed(1)} MB queued`).toBeLessThan(8 * 1024 * 1024);
    expect(opened[0]?.destroyed || opened[0]?.writableEnded).toBe(true);
  });
});
