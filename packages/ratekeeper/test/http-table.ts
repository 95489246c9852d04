/**
 * The one behaviour table every HTTP adapter runs (adapter-*.test.ts), through real HTTP on a
 * loopback port 0 and, where the framework offers it, in-process (Hono app.request, fastify.inject).
 *
 * Time is a manual clock injected into the limiter; the only real waits are the shaping delays
 * themselves (tens of ms, asserted as lower bounds only).
 */
import http from "node:http";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MemoryStore, RateLimiter, RateLimitStoreError, type LimitSpec, type Store } from "ratekeeper";
import type { RateLimitEvent } from "ratekeeper/http";
import { RedisStore } from "ratekeeper/redis";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";

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

function newClock(): Clock {
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
async function eventually(fn: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  expect(await fn()).toBe(true);
}

/** What a case sees: its clock, its limiter (when it built one), what the callbacks reported. */
interface Ctx {
  clock: Clock;
  events: RateLimitEvent<unknown>[];
  errors: unknown[];
  store: () => Store;
  limiter?: RateLimiter;
  driver: Driver;
  /** A namespace of its own, so cases never share state in a shared (Redis) store. */
  ns: string;
}

interface Case {
  name: string;
  needsSocket?: boolean;
  /** Cases that bring their own (failing) store: run once, not again per store. */
  memoryOnly?: boolean;
  listen?: { host: string };
  options(ctx: Ctx): Record<string, unknown>;
  run(t: Target, ctx: Ctx): Promise<void>;
}

const fixed = (limit: number, window: LimitSpec["window"], name?: string): LimitSpec => ({
  algorithm: "fixed-window",
  limit,
  window,
  ...(name ? { name } : {}),
});

function common(ctx: Ctx): Record<string, unknown> {
  return {
    clock: ctx.clock.fn,
    store: ctx.store(),
    namespace: ctx.ns,
    onDecision: (e: RateLimitEvent<unknown>) => ctx.events.push(e),
    onError: (e: unknown) => ctx.errors.push(e),
  };
}

/** A limiter the case keeps a handle on (for peek/refund checks); the middleware gets it as `limiter`. */
function withLimiter(ctx: Ctx, limits: LimitSpec[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  ctx.limiter = new RateLimiter({ limits, clock: ctx.clock.fn, store: ctx.store(), namespace: ctx.ns });
  return {
    limiter: ctx.limiter,
    onDecision: (e: RateLimitEvent<unknown>) => ctx.events.push(e),
    onError: (e: unknown) => ctx.errors.push(e),
    ...extra,
  };
}

function problem(r: Reply): Record<string, unknown> {
  expect(r.headers["content-type"]).toMatch(/^application\/problem\+json/);
  return JSON.parse(r.body) as Record<string, unknown>;
}

const CASES: Case[] = [
  {
    name: "admits up to the limit, then 429 with Retry-After, problem+json and IETF headers; the window passes",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(3, "1m")] }),
    async run(t, ctx) {
      for (const r of [2, 1, 0]) {
        const res = await t.request();
        expect(res.status).toBe(200);
        expect(res.body).toBe("hello");
        expect(res.headers["ratelimit-policy"]).toBe('"3-per-1m";q=3;w=60');
        expect(res.headers["ratelimit"]).toBe(`"3-per-1m";r=${r};t=60`);
        expect(res.headers["retry-after"]).toBeUndefined();
      }
      ctx.clock.now += 20_000;
      const denied = await t.request();
      expect(denied.status).toBe(429);
      expect(denied.headers["retry-after"]).toBe("40");
      expect(denied.headers["ratelimit"]).toBe('"3-per-1m";r=0;t=40');
      const body = problem(denied);
      expect(body).toMatchObject({
        type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
        status: 429,
        "retry-after": 40,
        "violated-policies": ["3-per-1m"],
      });
      ctx.clock.now += 40_000;
      expect((await t.request()).status).toBe(200);
    },
  },
  {
    name: "several rules on one key (100 per minute AND 2 per second): all-or-nothing, one named policy each",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(100, "1m", "minute"), fixed(2, "1s", "second")] }),
    async run(t, ctx) {
      expect((await t.request()).status).toBe(200);
      const second = await t.request();
      expect(second.headers["ratelimit-policy"]).toBe('"minute";q=100;w=60, "second";q=2;w=1');
      expect(second.headers["ratelimit"]).toBe('"minute";r=98;t=60, "second";r=0;t=1');
      const denied = await t.request();
      expect(denied.status).toBe(429);
      expect(denied.headers["retry-after"]).toBe("1");
      // The denial charged nothing: the minute rule still has 98.
      expect(denied.headers["ratelimit"]).toBe('"minute";r=98;t=60, "second";r=0;t=1');
      expect(problem(denied)["violated-policies"]).toEqual(["second"]);
      expect(ctx.events[2]?.decision.limits?.map((l) => l.allowed)).toEqual([true, false]);
      ctx.clock.now += 1_000;
      const again = await t.request();
      expect(again.status).toBe(200);
      expect(again.headers["ratelimit"]).toBe('"minute";r=97;t=59, "second";r=1;t=1');
    },
  },
  {
    name: "costs from one bucket: GET /user costs 1, POST /user costs 2",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(5, "1m", "user")], cost: { "GET /user": 1, "POST /user": 2 } }),
    async run(t, ctx) {
      const p1 = await t.request({ method: "POST", path: "/user" });
      expect(p1.status).toBe(201);
      expect(p1.headers["ratelimit"]).toBe('"user";r=3;t=60');
      expect((await t.request({ method: "POST", path: "/user" })).headers["ratelimit"]).toBe('"user";r=1;t=60');
      // One unit left: a POST (2) is refused, a GET (1) still fits.
      const p3 = await t.request({ method: "POST", path: "/user" });
      expect(p3.status).toBe(429);
      expect(p3.headers["ratelimit"]).toBe('"user";r=1;t=60');
      expect((await t.request({ path: "/user" })).status).toBe(200);
      expect((await t.request({ path: "/user" })).status).toBe(429);
      expect(ctx.events.map((e) => e.cost)).toEqual([2, 2, 2, 1, 1]);
    },
  },
  {
    name: "header style draft-7: RateLimit: limit, remaining, reset",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], headers: "draft-7" }),
    async run(t) {
      const ok = await t.request();
      expect(ok.headers["ratelimit"]).toBe("limit=1, remaining=0, reset=60");
      expect(ok.headers["ratelimit-policy"]).toBe("1;w=60");
      const denied = await t.request();
      expect(denied.status).toBe(429);
      expect(denied.headers["ratelimit"]).toBe("limit=1, remaining=0, reset=60");
      expect(denied.headers["retry-after"]).toBe("60");
    },
  },
  {
    name: "header style draft-6: RateLimit-Limit / -Remaining / -Reset",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(2, "1m")], headers: "draft-6" }),
    async run(t) {
      const ok = await t.request();
      expect([ok.headers["ratelimit-limit"], ok.headers["ratelimit-remaining"], ok.headers["ratelimit-reset"]]).toEqual(["2", "1", "60"]);
      expect(ok.headers["ratelimit"]).toBeUndefined();
    },
  },
  {
    name: "header style x-ratelimit: X-RateLimit-Limit / -Remaining / -Reset (epoch seconds)",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(2, "1m")], headers: "x-ratelimit" }),
    async run(t) {
      const ok = await t.request();
      expect([ok.headers["x-ratelimit-limit"], ok.headers["x-ratelimit-remaining"], ok.headers["x-ratelimit-reset"]]).toEqual([
        "2",
        "1",
        String(T0 / 1000 + 60),
      ]);
      expect(ok.headers["ratelimit-policy"]).toBeUndefined();
    },
  },
  {
    name: "headers: false sends no limit headers, but a 429 still carries Retry-After",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], headers: false }),
    async run(t) {
      const ok = await t.request();
      expect(Object.keys(ok.headers).filter((h) => h.includes("ratelimit"))).toEqual([]);
      const denied = await t.request();
      expect(denied.status).toBe(429);
      expect(denied.headers["retry-after"]).toBe("60");
    },
  },
  {
    name: "shadow mode decides, sets headers and reports, but never blocks",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], shadow: true }),
    async run(t, ctx) {
      for (let i = 0; i < 3; i++) {
        const r = await t.request();
        expect(r.status).toBe(200);
        expect(r.headers["ratelimit"]).toBe('"1-per-1m";r=0;t=60');
      }
      expect(ctx.events.map((e) => [e.limited, e.shadow])).toEqual([
        [false, true],
        [true, true],
        [true, true],
      ]);
    },
  },
  {
    name: "skip: skipped requests are neither counted nor given headers",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], skip: (req: unknown) => ctx.driver.pathOf(req) === "/status/202" }),
    async run(t) {
      for (let i = 0; i < 3; i++) {
        const r = await t.request({ path: "/status/202" });
        expect(r.status).toBe(202);
        expect(r.headers["ratelimit"]).toBeUndefined();
      }
      expect((await t.request()).status).toBe(200);
      expect((await t.request()).status).toBe(429);
    },
  },
  {
    name: "allow list: listed clients are never limited",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], allowList: ["127.0.0.0/8"] }),
    async run(t, ctx) {
      for (let i = 0; i < 3; i++) expect((await t.request()).status).toBe(200);
      expect(ctx.events).toEqual([]);
    },
  },
  {
    name: "deny list: listed clients get 403 problem+json",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(100, "1m")], denyList: ["127.0.0.1", "10.0.0.0/8"] }),
    async run(t) {
      const r = await t.request();
      expect(r.status).toBe(403);
      expect(problem(r)).toMatchObject({ status: 403, title: "Forbidden" });
    },
  },
  {
    name: "untrusted peer: a spoofed X-Forwarded-For or Forwarded changes nothing",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")] }),
    async run(t, ctx) {
      expect((await t.request({ headers: { "x-forwarded-for": "1.1.1.1" } })).status).toBe(200);
      expect((await t.request({ headers: { "x-forwarded-for": "2.2.2.2" } })).status).toBe(429);
      expect((await t.request({ headers: { forwarded: "for=3.3.3.3" } })).status).toBe(429);
      expect(new Set(ctx.events.map((e) => e.key))).toEqual(new Set(["127.0.0.1"]));
    },
  },
  {
    name: "trusted proxies: X-Forwarded-For read from the right; spoofed entries left of the client change nothing; ::ffff: mapped",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], trustedProxies: ["loopback", "10.0.0.0/8"] }),
    async run(t, ctx) {
      expect((await t.request({ headers: { "x-forwarded-for": "6.6.6.6, 203.0.113.9, 10.1.2.3" } })).status).toBe(200);
      expect((await t.request({ headers: { "x-forwarded-for": "7.7.7.7, 203.0.113.9, 10.9.9.9" } })).status).toBe(429);
      expect((await t.request({ headers: { "x-forwarded-for": "::ffff:203.0.113.9" } })).status).toBe(429);
      expect((await t.request({ headers: { "x-forwarded-for": "203.0.113.10" } })).status).toBe(200);
      expect(ctx.events.map((e) => e.key)).toEqual(["203.0.113.9", "203.0.113.9", "203.0.113.9", "203.0.113.10"]);
    },
  },
  {
    name: "trusted proxies with RFC 7239 Forwarded (and X-Forwarded-For then ignored)",
    options: (ctx) => ({
      ...common(ctx),
      limits: [fixed(5, "1m")],
      trustedProxies: ["loopback"],
      forwardedHeader: "forwarded",
      ipv6Subnet: 128,
    }),
    async run(t, ctx) {
      await t.request({
        headers: { forwarded: 'for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"', "x-forwarded-for": "9.9.9.9" },
      });
      await t.request({ headers: { "x-forwarded-for": "9.9.9.9" } });
      expect(ctx.events.map((e) => e.key)).toEqual(["2001:db8:cafe::17", "127.0.0.1"]);
    },
  },
  {
    name: "IPv6 clients are grouped by /64: rotating addresses inside the prefix shares one bucket",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], trustedProxies: ["loopback"] }),
    async run(t, ctx) {
      expect((await t.request({ headers: { "x-forwarded-for": "2001:db8:1:2::1" } })).status).toBe(200);
      expect((await t.request({ headers: { "x-forwarded-for": "2001:DB8:1:2:aaaa:bbbb:cccc:dddd" } })).status).toBe(429);
      expect((await t.request({ headers: { "x-forwarded-for": "2001:db8:1:3::1" } })).status).toBe(200);
      expect(ctx.events.map((e) => e.key)).toEqual(["2001:db8:1:2::/64", "2001:db8:1:2::/64", "2001:db8:1:3::/64"]);
    },
  },
  {
    name: "an IPv6 peer on ::1 is keyed by its /64",
    needsSocket: true,
    listen: { host: "::1" },
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")] }),
    async run(t, ctx) {
      expect((await t.request()).status).toBe(200);
      expect((await t.request()).status).toBe(429);
      expect(ctx.events.map((e) => e.key)).toEqual(["::/64", "::/64"]);
    },
  },
  {
    name: "keys from an API key header, method and route combined",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], key: [{ header: "x-api-key" }, "method", "route"] }),
    async run(t, ctx) {
      expect((await t.request({ path: "/user", headers: { "x-api-key": "k1" } })).status).toBe(200);
      expect((await t.request({ path: "/user", headers: { "x-api-key": "k1" } })).status).toBe(429);
      expect((await t.request({ path: "/user", headers: { "x-api-key": "k2" } })).status).toBe(200);
      expect((await t.request({ path: "/user", method: "POST", headers: { "x-api-key": "k1" } })).status).toBe(201);
      // No API key: falls back to the client address rather than one shared anonymous bucket.
      expect((await t.request({ path: "/user" })).status).toBe(200);
      expect(ctx.events.map((e) => e.key)).toEqual([
        "x-api-key=k1|GET|/user",
        "x-api-key=k1|GET|/user",
        "x-api-key=k2|GET|/user",
        "x-api-key=k1|POST|/user",
        "ip=127.0.0.1|GET|/user",
      ]);
    },
  },
  {
    name: "a custom key function (a user id)",
    options: (ctx) => ({
      ...common(ctx),
      limits: [fixed(1, "1m")],
      key: async (_req: unknown, info: { ip: string }) => `user:${info.ip === "127.0.0.1" ? "alice" : "bob"}`,
    }),
    async run(t, ctx) {
      expect((await t.request()).status).toBe(200);
      expect((await t.request()).status).toBe(429);
      expect(ctx.events[0]?.key).toBe("user:alice");
    },
  },
  {
    name: "shaping (leaky-bucket shape): admitted requests are held for delayMs; beyond maxDelayMs, 429 and the place is given back",
    options: (ctx) =>
      withLimiter(ctx, [{ algorithm: "leaky-bucket", mode: "shape", limit: 20, window: "1s", capacity: 4, name: "queue" }], {
        maxDelayMs: 60,
      }),
    async run(t, ctx) {
      // 20 per second: one unit drains every 50 ms. The clock stands still; only the holds are real time.
      const t1 = performance.now();
      expect((await t.request()).status).toBe(200);
      const t2 = performance.now();
      expect((await t.request()).status).toBe(200);
      const t3 = performance.now();
      expect(t3 - t2).toBeGreaterThanOrEqual(45); // held ~50 ms (timers may fire up to ~1 ms early)
      const over = await t.request();
      expect(over.status).toBe(429);
      expect(over.headers["retry-after"]).toBe("1"); // 100 ms wait - 60 ms max = 40 ms, rounded up to 1 s
      const again = await t.request();
      expect(again.status).toBe(429);
      // The refused request gave its place back: the next one sees the same 100 ms queue (40 ms over), not 150.
      expect(ctx.events.map((e) => [e.limited, e.decision.delayMs, e.decision.retryAfterMs])).toEqual([
        [false, 0, 0],
        [false, 50, 0],
        [true, 0, 40],
        [true, 0, 40],
      ]);
      expect(t2 - t1).toBeGreaterThanOrEqual(0);
    },
  },
  {
    name: "shaping: a client that disconnects while held gives its place back",
    needsSocket: true,
    // 10 per second: the held request would wait 100 ms, a wide margin for the client to leave first on a busy machine.
    options: (ctx) =>
      withLimiter(ctx, [{ algorithm: "leaky-bucket", mode: "shape", limit: 10, window: "1s", capacity: 10, name: "queue" }], {
        maxDelayMs: 5_000,
      }),
    async run(t, ctx) {
      const limiter = ctx.limiter as RateLimiter;
      expect((await t.request()).status).toBe(200); // level 1 unit
      // This one would wait 100 ms; it leaves as soon as the middleware has decided (and holds it).
      await (t.abandon as NonNullable<Target["abandon"]>)({}, () => ctx.events.length >= 2);
      await eventually(async () => (await limiter.peek("127.0.0.1")).delayMs === 100);
      const r = await t.request();
      expect(r.status).toBe(200);
      expect(ctx.events.map((e) => e.decision.delayMs)).toEqual([0, 100, 100]);
    },
  },
  {
    name: "countOnly failed: successful responses are refunded, failures count",
    options: (ctx) => withLimiter(ctx, [fixed(2, "1m")], { countOnly: "failed" }),
    async run(t, ctx) {
      const limiter = ctx.limiter as RateLimiter;
      for (let i = 0; i < 4; i++) {
        expect((await t.request({ path: "/status/200" })).status).toBe(200);
        // peek reports what would remain after one more request: 1 of 2 when nothing is charged.
        await eventually(async () => (await limiter.peek("127.0.0.1")).remaining === 1);
      }
      expect((await t.request({ path: "/status/500" })).status).toBe(500);
      expect((await t.request({ path: "/status/404" })).status).toBe(404);
      expect((await t.request({ path: "/status/200" })).status).toBe(429);
    },
  },
  {
    name: "countOnly successful: failed responses are refunded",
    options: (ctx) => withLimiter(ctx, [fixed(1, "1m")], { countOnly: "successful" }),
    async run(t, ctx) {
      const limiter = ctx.limiter as RateLimiter;
      for (let i = 0; i < 3; i++) {
        expect((await t.request({ path: "/status/503" })).status).toBe(503);
        await eventually(async () => (await limiter.peek("127.0.0.1")).allowed);
      }
      expect((await t.request()).status).toBe(200);
      expect((await t.request()).status).toBe(429);
    },
  },
  {
    name: "store failure: the request goes through and onError hears of it (default)",
    memoryOnly: true,
    options: (ctx) => ({ limits: [fixed(1, "1m")], store: failingStore(), onError: (e: unknown) => ctx.errors.push(e) }),
    async run(t, ctx) {
      const r = await t.request();
      expect(r.status).toBe(200);
      expect(r.headers["ratelimit"]).toBeUndefined();
      expect(ctx.errors).toHaveLength(1);
      expect(ctx.errors[0]).toBeInstanceOf(RateLimitStoreError);
    },
  },
  {
    name: 'a store that rejects, with failure: "closed", answers 503 problem+json',
    memoryOnly: true,
    options: (ctx) => ({
      limits: [fixed(1, "1m")],
      store: failingStore(),
      failure: "closed",
      onError: (e: unknown) => ctx.errors.push(e),
    }),
    async run(t, ctx) {
      const r = await t.request();
      expect(r.status).toBe(503);
      expect(problem(r)).toMatchObject({ status: 503 });
      expect(ctx.errors).toHaveLength(1);
    },
  },
  {
    name: 'a store that rejects, with the default failure: "open", lets the request through and reports it',
    memoryOnly: true,
    options: (ctx) => ({
      limits: [fixed(1, "1m")],
      store: failingStore(),
      onError: (e: unknown) => ctx.errors.push(e),
    }),
    async run(t, ctx) {
      expect((await t.request()).status).toBe(200);
      expect(String(ctx.errors[0])).toMatch(/store down/);
    },
  },
];

/** A real Store whose every call fails, as a Redis store with `failOpen: false` does when Redis is down. */
function failingStore(): Store {
  const fail = () => Promise.reject(new RateLimitStoreError("store down", { cause: new Error("ECONNREFUSED") }));
  return { bind: () => ({ consume: fail, peek: fail, refund: fail, reset: fail }) };
}

let caseCounter = 0;

/**
 * Registers one `it` per case for `driver`.
 * @param storeFactory the store each case's limiter uses (memory by default; Redis in the Redis block)
 */
export function behaviourTable(
  driver: Driver,
  storeFactory: () => Store = () => new MemoryStore({ sweepIntervalMs: 0 }),
  label = "memory",
): void {
  for (const c of CASES) {
    if (c.needsSocket && !driver.real) continue;
    if (c.memoryOnly && label !== "memory") continue;
    it(`${driver.name} [${label}]: ${c.name}`, async () => {
      const ctx: Ctx = { clock: newClock(), events: [], errors: [], store: storeFactory, driver, ns: `t${++caseCounter}-${process.pid}` };
      const t = await driver.start(c.options(ctx), c.listen);
      try {
        await c.run(t, ctx);
      } finally {
        await t.close();
      }
    });
  }
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
 * The same table against the Redis store: one throw-away redis-server per test file
 * (test-support/redis.ts), skipped loudly without redis-server, required under CI.
 */
export function redisBehaviourTable(drivers: readonly Driver[]): void {
  describeRedis("with the Redis store", () => {
    let redis: RedisHandle | undefined;
    let client: Redis | undefined;
    beforeAll(async () => {
      redis = await startRedis();
      client = new Redis(redis.port, redis.host, { lazyConnect: false, maxRetriesPerRequest: 1 });
    });
    afterAll(async () => {
      client?.disconnect();
      await redis?.stop();
    });
    // A generous timeout: the machine is shared; a timeout here would turn into a silent fail-open.
    const factory = (): Store => new RedisStore({ client: client as Redis, timeoutMs: 5_000, failure: "closed" });
    for (const d of drivers) behaviourTable(d, factory, "redis");
  });
}
