/**
 * What the HTTP behaviour table (http-table.ts) is made of: how a framework is driven (real HTTP
 * on a loopback port, or in-process), a manual clock, and the context and helpers each case
 * (http-cases-*.ts) uses.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect } from "vitest";
import { RateLimiter, type LimitSpec, type Store } from "ratekeeper";
import type { RateLimitEvent } from "ratekeeper/http";

/** A response, headers lower-cased. */
export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A request to send. */
export interface Send {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
}

/** A running app under test. */
export interface Target {
  request(r?: Send): Promise<Reply>;
  /** Sends a request and drops the connection once `when()` holds (polled; real HTTP only). */
  abandon?(r: Send, when: () => boolean): Promise<void>;
  close(): Promise<void>;
}

/** How one framework (and one way of calling it) is started. */
export interface Driver {
  name: string;
  /** Whether requests go through a real socket (disconnects, IPv6 peers). */
  real: boolean;
  /** The request path, read from the framework's request object (for `skip`). */
  pathOf(req: unknown): string;
  start(options: Record<string, unknown>, listen?: { host: string }): Promise<Target>;
}

/** A manual clock: starts on a minute boundary so fixed windows are easy to read. */
export interface Clock {
  now: number;
  readonly fn: () => number;
}
export const T0 = 1_700_000_040_000; // a multiple of 60 000

export function newClock(): Clock {
  const c = { now: T0, fn: () => c.now };
  return c;
}

/** Sends a request over a real socket (no keep-alive, so every request is independent). */
export function httpRequest(base: string, r: Send = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(r.path ?? "/", base), { method: r.method ?? "GET", headers: r.headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : v;
        resolve({ status: res.statusCode ?? 0, headers, body });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/** Sends a request and destroys the socket once `when()` holds (polled every 2 ms, at most 2 s); resolves once it is gone. */
export function httpAbandon(base: string, r: Send, when: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const req = http.request(new URL(r.path ?? "/", base), { method: r.method ?? "GET", headers: r.headers, agent: false });
    req.on("error", () => resolve());
    req.on("close", () => resolve());
    req.on("response", () => resolve());
    req.end();
    let tries = 0;
    const poll = setInterval(() => {
      if (when() || ++tries > 1000) {
        clearInterval(poll);
        req.destroy();
      }
    }, 2);
  });
}

/** Polls `fn` until it returns true (bounded: 100 x 10 ms); for effects that land after a response. */
export async function eventually(fn: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  expect(await fn()).toBe(true);
}

/** What a case sees: its clock, its limiter (when it built one), what the callbacks reported. */
export interface Ctx {
  clock: Clock;
  events: RateLimitEvent<unknown>[];
  errors: unknown[];
  store: () => Store;
  limiter?: RateLimiter;
  driver: Driver;
  /** A namespace of its own, so cases never share state in a shared (Redis) store. */
  ns: string;
}

export interface Case {
  name: string;
  needsSocket?: boolean;
  /** Cases that bring their own (failing) store: run once, not again per store. */
  memoryOnly?: boolean;
  listen?: { host: string };
  options(ctx: Ctx): Record<string, unknown>;
  run(t: Target, ctx: Ctx): Promise<void>;
}

export const fixed = (limit: number, window: LimitSpec["window"], name?: string): LimitSpec => ({
  algorithm: "fixed-window",
  limit,
  window,
  ...(name ? { name } : {}),
});

export function common(ctx: Ctx): Record<string, unknown> {
  return {
    clock: ctx.clock.fn,
    store: ctx.store(),
    namespace: ctx.ns,
    onDecision: (e: RateLimitEvent<unknown>) => ctx.events.push(e),
    onError: (e: unknown) => ctx.errors.push(e),
  };
}

/** A limiter the case keeps a handle on (for peek/refund checks); the middleware gets it as `limiter`. */
export function withLimiter(ctx: Ctx, limits: LimitSpec[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  ctx.limiter = new RateLimiter({ limits, clock: ctx.clock.fn, store: ctx.store(), namespace: ctx.ns });
  return {
    limiter: ctx.limiter,
    onDecision: (e: RateLimitEvent<unknown>) => ctx.events.push(e),
    onError: (e: unknown) => ctx.errors.push(e),
    ...extra,
  };
}

export function problem(r: Reply): Record<string, unknown> {
  expect(r.headers["content-type"]).toMatch(/^application\/problem\+json/);
  return JSON.parse(r.body) as Record<string, unknown>;
}

/** A driver over real HTTP for an example app whose `start(options, { port: 0, host })` resolves `{ url, close }`. */
export function realDriver(
  name: string,
  start: (options: Record<string, unknown>, listen: { port: number; host: string }) => Promise<{ url: string; close: () => Promise<void> }>,
  pathOf: (req: unknown) => string,
): Driver {
  return {
    name: `${name} (http)`,
    real: true,
    pathOf,
    async start(options, listen = { host: "127.0.0.1" }) {
      const s = await start(options, { port: 0, host: listen.host });
      return {
        request: (r) => httpRequest(s.url, r),
        abandon: (r, when) => httpAbandon(s.url, r, when),
        close: s.close,
      };
    },
  };
}

/**
 * A `listen(server, host?)` for a test file: each server listens on a free port of a loopback
 * address (127.0.0.1 unless given, e.g. "::1"; resolving with its base URL) and is closed, with its
 * connections, after each test; `listen.track(server)` closes one the test listened with itself (a
 * unix socket). Call once, at the top level.
 * @example const listen = loopbackServers(); const url = await listen(createServer(handler));
 */
export function loopbackServers(): ((server: http.Server, host?: string) => Promise<string>) & { track(server: http.Server): void } {
  const servers: http.Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });
  const listen = async (server: http.Server, host = "127.0.0.1") => {
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, host, r));
    const port = (server.address() as AddressInfo).port;
    return host.includes(":") ? `http://[${host}]:${port}` : `http://${host}:${port}`;
  };
  return Object.assign(listen, { track: (server: http.Server) => void servers.push(server) });
}
