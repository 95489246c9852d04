/**
 * The middleware's `concurrency` option on paths where a response never finishes or closes
 * through the usual events. The middleware renews a request's lease until the response is done
 * (http-concurrency-long.test.ts), so a path that never gives the lease back would hold its slot,
 * and an interval timer, for good (before the keep-alive it expired after `leaseMs`):
 * - a request routed through an Express app on a response of its own, not attached to the socket:
 *   how express-ws routes a WebSocket upgrade (`app.handle(req, new ServerResponse(req))`). That
 *   response never emits 'finish' or 'close'; the request's socket closes when the client goes.
 * - a request whose headers a middleware before ours had already sent: setting the rate-limit
 *   headers throws after the lease was taken (node:http and Express).
 * The pool's clock is injected and the keep-alive's interval timer faked, so no time passes.
 */
import { once } from "node:events";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConcurrencyLimiter, MemoryStore, RateLimiter } from "ratekeeper";
import { until } from "../../../test-support/process.js";
import { httpRequest } from "./http-support.js";

async function listen(server: http.Server): Promise<number> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as AddressInfo).port;
}

function pool(clock: { now: number }): ConcurrencyLimiter {
  return new ConcurrencyLimiter({ limit: 1, leaseMs: 30_000, store: new MemoryStore({ sweepIntervalMs: 0 }), clock: () => clock.now });
}

/** Two minutes, four times the lease, in steps of 10 s: a lease left to itself expires. */
async function twoMinutes(clock: { now: number }): Promise<void> {
  for (let t = 0; t < 12; t++) {
    clock.now += 10_000;
    vi.advanceTimersByTime(10_000);
    await new Promise((r) => setImmediate(r));
  }
}

afterEach(() => {
  vi.useRealTimers();
});

describe("express: concurrency, a request routed on a response not attached to its socket (express-ws upgrades)", () => {
  it("gives the lease back when the request's socket closes", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const clock = { now: 1_763_740_800_000 };
    const limiter = pool(clock);
    const express = (await import("express")).default;
    const { rateLimit } = await import("ratekeeper/express");
    const app = express();
    app.use(rateLimit({ concurrency: limiter }));
    let upgraded = 0;
    // The WebSocket route: answers 101 on the socket itself, never ends the response.
    app.get("/ws", (req) => {
      req.socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
      upgraded++;
    });
    const server = http.createServer(app);
    server.on("upgrade", (req: http.IncomingMessage, socket: net.Socket) => {
      socket.on("error", () => undefined); // the client resets it
      // What express-ws does: the app sees the upgrade on a response of its own.
      app(req as never, new http.ServerResponse(req) as never);
    });
    const sockets: net.Socket[] = [];
    server.on("connection", (s: net.Socket) => sockets.push(s));
    const port = await listen(server);
    const client = net.connect(port, "127.0.0.1");
    try {
      await once(client, "connect");
      client.write("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
      await until(() => upgraded === 1, "the upgrade routed", 400, 5);
      expect((await limiter.peek("127.0.0.1")).remaining).toBe(0); // held while the socket is open
      client.resetAndDestroy(); // the client gone: the server's socket closes
      await until(() => sockets.length === 1 && (sockets[0] as net.Socket).destroyed, "the server saw the client go", 400, 5);
      await new Promise((r) => setImmediate(r));
      await twoMinutes(clock);
      expect((await limiter.peek("127.0.0.1")).remaining).toBe(1);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      client.destroy();
      server.closeAllConnections();
      server.close();
    }
  });
});

/** A rate limit too, so that there are headers to set (its store sweeps on no timer). */
const LIMIT = new RateLimiter({ algorithm: "fixed-window", limit: 100, window: "1m", store: new MemoryStore({ sweepIntervalMs: 0 }) });

const EARLY: Record<string, () => Promise<http.RequestListener>> = {
  async node() {
    const { withRateLimit } = await import("ratekeeper/node");
    const limited = withRateLimit({ limiter: LIMIT, concurrency: current }, (_req, res) => res.end("done"));
    return (req, res) => {
      res.flushHeaders(); // headers sent before the middleware runs
      limited(req, res);
    };
  },
  async express() {
    const express = (await import("express")).default;
    const { rateLimit } = await import("ratekeeper/express");
    const app = express();
    app.use((_req, res, next) => {
      res.flushHeaders();
      next();
    });
    app.use(rateLimit({ limiter: LIMIT, concurrency: current }));
    app.get("/", (_req, res) => void res.end("done"));
    return app;
  },
};
let current: ConcurrencyLimiter | undefined;

describe.each(Object.keys(EARLY))("%s: concurrency, headers already sent before the middleware", (name) => {
  it("gives the lease back when setting the rate-limit headers throws", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const clock = { now: 1_763_740_800_000 };
    current = pool(clock);
    const limiter = current;
    const server = http.createServer(await (EARLY[name] as () => Promise<http.RequestListener>)());
    let closed = 0;
    server.on("request", (_req: http.IncomingMessage, res: http.ServerResponse) => res.once("close", () => closed++));
    const port = await listen(server);
    try {
      // Its answer may never end (the headers went out without a length): the server's side is watched.
      httpRequest(`http://127.0.0.1:${port}`, { path: "/" }).catch(() => undefined);
      await until(() => closed === 1, "the response closed", 400, 5);
      await new Promise((r) => setImmediate(r));
      await twoMinutes(clock);
      expect((await limiter.peek("127.0.0.1")).remaining).toBe(1);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
