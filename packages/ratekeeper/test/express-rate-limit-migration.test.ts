/**
 * Moving from express-rate-limit: its documented examples, with only the import changed
 * (`express-rate-limit` -> `ratekeeper/express`), behave the same. Each example is built twice,
 * once on express-rate-limit itself and once on ratekeeper, and the same requests go to both
 * over real HTTP: the statuses, the rate-limit headers, the bodies and `req.rateLimit` must be
 * equal, response by response. The clock (Date) is frozen so reset times are comparable.
 */
import { createServer } from "node:http";
import express, { type Request, type RequestHandler } from "express";
import { rateLimit as erl } from "express-rate-limit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { rateLimit as ours } from "../src/adapters/express.js";
import { httpRequest, loopbackServers, type Send } from "./http-support.js";

type Factory = (options: Record<string, unknown>) => RequestHandler & { resetKey(key: string): unknown };

const listen = loopbackServers();
beforeAll(() => {
  vi.useFakeTimers({ toFake: ["Date"], now: new Date("2026-11-24T12:00:00.250Z") });
});
afterAll(() => {
  vi.useRealTimers();
});

/** An app with the example's limiter in front of routes that echo `req[prop]`; `/fail` answers 500. */
async function start(
  rateLimit: Factory,
  options: Record<string, unknown>,
  prop = "rateLimit",
): Promise<{ url: string; limiter: ReturnType<Factory> }> {
  const app = express();
  const limiter = rateLimit(options);
  app.use(limiter);
  app.get("/fail", (req, res) => res.status(500).json((req as unknown as Record<string, unknown>)[prop] ?? null));
  app.get("/{*any}", (req, res) => res.json((req as unknown as Record<string, unknown>)[prop] ?? null));
  return { url: await listen(createServer(app)), limiter };
}

/** The parts of a response the two must agree on. */
async function observe(url: string, send: Send) {
  const r = await httpRequest(url, send);
  const headers = Object.fromEntries(
    Object.entries(r.headers).filter(([k]) => /ratelimit|retry-after|content-type/.test(k) && k !== "date"),
  );
  return { path: send.path, status: r.status, headers, body: r.body };
}

/** Runs the same requests through express-rate-limit and through ratekeeper; returns both transcripts. */
async function sideBySide(
  options: Record<string, unknown>,
  requests: Send[],
  prop?: string,
  between?: (l: ReturnType<Factory>) => unknown,
) {
  const a = await start(erl, options, prop);
  const b = await start(ours, options, prop);
  const theirs = [];
  const mine = [];
  for (const [i, r] of requests.entries()) {
    if (between !== undefined && i === requests.length - 1) {
      await between(a.limiter);
      await between(b.limiter);
    }
    theirs.push(await observe(a.url, r));
    mine.push(await observe(b.url, r));
  }
  return { theirs, mine };
}

const times = (n: number, send: Send = {}): Send[] => Array.from({ length: n }, () => send);

describe("express-rate-limit's documented examples, only the import changed", () => {
  it("the README's usage: 100 per 15 minutes, draft-8 headers, no legacy headers, ipv6Subnet 56", async () => {
    const { theirs, mine } = await sideBySide(
      {
        windowMs: 15 * 60 * 1000, // 15 minutes
        limit: 100, // Limit each IP to 100 requests per `window` (here, per 15 minutes).
        standardHeaders: "draft-8", // draft-6: `RateLimit-*` headers; draft-7 & draft-8: combined `RateLimit` header
        legacyHeaders: false, // Disable the `X-RateLimit-*` headers.
        ipv6Subnet: 56, // Set to 60 or 64 to be less aggressive, or 52 or 48 to be more aggressive
      },
      times(102),
    );
    expect(mine).toEqual(theirs);
    expect(theirs.map((r) => r.status)).toEqual([...Array<number>(100).fill(200), 429, 429]);
    expect(JSON.parse((theirs[0] as { body: string }).body)).toMatchObject({ limit: 100, used: 1, remaining: 99, key: "127.0.0.1" });
  });

  it("defaults (5 per minute, legacy X-RateLimit-* headers, the default message), then resetKey", async () => {
    const { theirs, mine } = await sideBySide({}, times(8), undefined, (l) => l.resetKey("127.0.0.1"));
    expect(mine).toEqual(theirs);
    expect(theirs.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429, 200]);
    expect((theirs[5] as { body: string }).body).toBe("Too many requests, please try again later.");
  });

  it("max (the old name) as a function of the request, keyGenerator, a message object, statusCode, draft-7", async () => {
    const options = {
      windowMs: 60 * 60 * 1000, // 1 hour
      max: (req: Request) => (req.query.plan === "premium" ? 3 : 2),
      keyGenerator: (req: Request) => req.query.apiKey as string,
      message: { error: "Too many requests from this API key, please try again after an hour" },
      statusCode: 503,
      standardHeaders: "draft-7",
    };
    const basic = { path: "/?apiKey=a" };
    const premium = { path: "/?apiKey=b&plan=premium" };
    const { theirs, mine } = await sideBySide(options, [basic, premium, basic, premium, basic, premium, premium]);
    expect(mine).toEqual(theirs);
    expect(theirs.map((r) => r.status)).toEqual([200, 200, 200, 200, 503, 200, 503]);
  });

  it("a custom handler with options, skip, skipFailedRequests, standardHeaders: true, requestPropertyName", async () => {
    const options = {
      windowMs: 10 * 60 * 1000,
      limit: 2,
      standardHeaders: true,
      skipFailedRequests: true,
      requestPropertyName: "limits",
      skip: (req: Request) => req.query.internal === "1",
      handler: (_req: Request, res: express.Response, _next: unknown, opts: { statusCode: number; message: string }) =>
        res.status(opts.statusCode).send(opts.message),
      message: "Slow down",
    };
    const { theirs, mine } = await sideBySide(
      options,
      [{ path: "/fail" }, { path: "/fail" }, {}, { path: "/?internal=1" }, {}, {}, { path: "/fail" }],
      "limits",
    );
    expect(mine).toEqual(theirs);
    expect(theirs.map((r) => r.status)).toEqual([500, 500, 200, 200, 200, 429, 429]);
  });

  it("skipSuccessfulRequests (a login form): only failures count", async () => {
    const { theirs, mine } = await sideBySide({ windowMs: 15 * 60 * 1000, limit: 2, skipSuccessfulRequests: true }, [
      {},
      {},
      {},
      { path: "/fail" },
      { path: "/fail" },
      { path: "/fail" },
      {},
    ]);
    expect(mine).toEqual(theirs);
    expect(theirs.map((r) => r.status)).toEqual([200, 200, 200, 500, 500, 429, 429]);
  });
});

describe("express-rate-limit options that ratekeeper cannot take are refused, saying what to write", () => {
  it("an express-rate-limit store, both skip*Requests, a bad limit, ipv6Subnet or logger", () => {
    const store = { increment: () => undefined, decrement: () => undefined, resetKey: () => undefined };
    expect(() => ours({ store } as never)).toThrow(/store: an express-rate-limit store; give a ratekeeper store instead: new MemoryStore/);
    expect(() => ours({ skipFailedRequests: true, skipSuccessfulRequests: true })).toThrow(/no request would count; use skip/);
    expect(() => ours({ limit: -1 })).toThrow(/limit: must be a whole number >= 0/);
    expect(() => ours({ ipv6Subnet: 200 })).toThrow(/ipv6Subnet: must be a whole number from 1 to 128, false or a function/);
    expect(() => ours({ logger: {} } as never)).toThrow(/logger: must be an object with error\(\) and warn\(\)/);
    expect(() => ours({ windowMs: 1000, headers: "draft-7" } as never)).toThrow(
      /headers: with express-rate-limit.s options, legacyHeaders. old name/,
    );
  });
});

describe("express-rate-limit options of the wrong type are refused when the middleware is made, naming the option", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ statusCode: "429" }, /statusCode: must be a whole number from 100 to 599 \(got "429"\)/],
    [{ statusCode: 99 }, /statusCode: must be a whole number from 100 to 599/],
    [{ legacyHeaders: "false" }, /legacyHeaders: must be true or false \(got "false"\)/],
    [{ skipFailedRequests: 1 }, /skipFailedRequests: must be true or false/],
    [{ skipSuccessfulRequests: "yes" }, /skipSuccessfulRequests: must be true or false/],
    [{ passOnStoreError: "true" }, /passOnStoreError: must be true or false/],
    [{ skip: true }, /skip: must be a function/],
    [{ keyGenerator: "ip" }, /keyGenerator: must be a function/],
    [{ handler: {} }, /handler: must be a function/],
    [{ requestWasSuccessful: false }, /requestWasSuccessful: must be a function/],
    [{ identifier: 5 }, /identifier: must be a string or a function/],
    [{ requestPropertyName: "" }, /requestPropertyName: must be a non-empty string/],
    [{ validate: "yes" }, /validate: must be true, false or an object/],
    [{ limits: [] }, /limits: ratekeeper's own option, which cannot be mixed with express-rate-limit's \(windowMs\)/],
    [
      { validate: { xForwardedForHeaders: false } },
      /validate\.xForwardedForHeaders: not one of express-rate-limit's validations \(default, ip, trustProxy, xForwardedForHeader/,
    ],
    [{ validate: { trustProxy: "no" } }, /validate\.trustProxy: must be true or false/],
  ];
  for (const [options, message] of cases) {
    it(JSON.stringify(options), () => {
      expect(() => ours({ windowMs: 1000, ...options })).toThrow(message);
    });
  }
});
