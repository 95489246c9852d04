/**
 * express-rate-limit's options, adversarially: each case runs the same options and requests
 * through express-rate-limit 8 itself and through `ratekeeper/express`, on real Express servers
 * on a loopback port, and compares what a user would see (statuses, rate-limit headers, bodies,
 * `req.rateLimit`). Where the two must differ (documented in
 * docs/migrating-from-express-rate-limit.md), the case says so and checks ratekeeper's side.
 */
import http, { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { rateLimit as erl } from "express-rate-limit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { rateLimit as ours } from "../src/adapters/express.js";
import type { Store } from "ratekeeper";
import { eventually, httpAbandon, httpRequest, loopbackServers, type Send } from "./http-support.js";

type Limiter = RequestHandler & { resetKey(key: string): unknown; getKey(key: string): unknown };
type Factory = (options: Record<string, unknown>) => Limiter;

const listen = loopbackServers();
let hung = 0;
beforeAll(() => {
  vi.useFakeTimers({ toFake: ["Date"], now: new Date("2026-11-24T12:00:00.250Z") });
});
afterAll(() => {
  vi.useRealTimers();
});

/** express-rate-limit's own logger, kept quiet and recorded (its validations print through it). */
const quiet = () => ({ warn: vi.fn(), error: vi.fn() });

/** An app with the limiter in front of routes that echo `req[prop]`; `/fail` answers 500; errors answer 500 with their message. */
async function start(rateLimit: Factory, options: Record<string, unknown>, host = "127.0.0.1", trustProxy: unknown = false) {
  const prop = "rateLimit";
  const app = express();
  app.set("trust proxy", trustProxy);
  const limiter = rateLimit(options);
  app.use(limiter);
  // Answers nothing: the client gives up (a request the client abandoned).
  app.get("/hang", () => void hung++);
  app.get("/fail", (req, res) => res.status(500).json((req as unknown as Record<string, unknown>)[prop] ?? null));
  app.get("/{*any}", (req, res) => res.json((req as unknown as Record<string, unknown>)[prop] ?? null));
  app.use((e: Error, _req: Request, res: Response, _next: NextFunction) => res.status(500).send(`error: ${e.message}`));
  return { url: await listen(createServer(app), host), limiter };
}

async function observe(url: string, send: Send) {
  const r = await httpRequest(url, send);
  const headers = Object.fromEntries(Object.entries(r.headers).filter(([k]) => /ratelimit|retry-after/.test(k)));
  return { status: r.status, headers, body: r.body };
}

/**
 * The same requests through both; express-rate-limit gets a quiet logger of its own. `settled`,
 * when given, is awaited after each request: what a limiter does once the response is sent (an
 * async `requestWasSuccessful`, then the decrement) is not done when the client has its answer.
 */
async function both(options: Record<string, unknown>, requests: Send[], host?: string, settled?: () => Promise<void>) {
  const a = await start(erl as Factory, { logger: quiet(), ...options }, host);
  const b = await start(ours as Factory, options, host);
  const theirs = [];
  const mine = [];
  for (const r of requests) {
    theirs.push(await observe(a.url, r));
    await settled?.();
    mine.push(await observe(b.url, r));
    await settled?.();
  }
  return { theirs, mine, a: a.limiter, b: b.limiter };
}

const times = (n: number, send: Send = {}): Send[] => Array.from({ length: n }, () => send);
const statuses = (rs: { status: number }[]) => rs.map((r) => r.status);

describe("every standardHeaders value with and without legacyHeaders: byte for byte", () => {
  for (const standardHeaders of [undefined, true, false, "draft-6", "draft-7", "draft-8"]) {
    for (const legacyHeaders of [undefined, true, false]) {
      it(`standardHeaders ${String(standardHeaders)}, legacyHeaders ${String(legacyHeaders)}`, async () => {
        const { theirs, mine } = await both({ windowMs: 90_500, limit: 2, standardHeaders, legacyHeaders }, times(4));
        expect(mine).toEqual(theirs);
      });
    }
  }
});

describe("options of express-rate-limit's documented table", () => {
  it("logger (a documented option) is accepted", async () => {
    const { theirs, mine } = await both({ limit: 1, logger: quiet() }, times(2));
    expect(mine).toEqual(theirs);
  });

  it("ipv6Subnet: false keys each IPv6 address on its own; a number groups; a function is asked", async () => {
    for (const ipv6Subnet of [false, 64, () => 48]) {
      const { theirs, mine } = await both({ limit: 1, ipv6Subnet, standardHeaders: "draft-8" }, times(2), "::1");
      expect(mine).toEqual(theirs);
    }
  });

  it("limit: 0 refuses every request, as express-rate-limit 7+ does", async () => {
    const { theirs, mine } = await both({ limit: 0, standardHeaders: "draft-7" }, times(1));
    expect(statuses(theirs)).toEqual([429]);
    expect(mine).toEqual(theirs);
  });

  it("a limit function returning 0 for some clients refuses them (429), not a 500", async () => {
    const limit = (req: Request) => (req.query.banned === "1" ? 0 : 2);
    const { theirs, mine } = await both({ limit, standardHeaders: "draft-6" }, [{ path: "/?banned=1" }, {}]);
    expect(statuses(theirs)).toEqual([429, 200]);
    expect(mine[0]).toEqual(theirs[0]);
    // Documented: each limit value keeps its own counters, so the refused request is not in the limit-2 count.
    expect(statuses(mine)).toEqual(statuses(theirs));
  });

  it("an async requestWasSuccessful (its docs: every function option may be async) decides what counts", async () => {
    let asked = 0;
    let answered = 0;
    const requestWasSuccessful = async (req: Request) => {
      asked++;
      await new Promise((r) => setTimeout(r, 1));
      answered++;
      return req.query.ok === "1";
    };
    // Each request's decrement follows its answer: the next request waits for it (else, on a busy
    // machine, express-rate-limit itself counted the second failed request against the third).
    const settled = async () => {
      await eventually(() => answered === asked && asked > 0);
      await new Promise((r) => setTimeout(r, 5)); // the decrement, in the turns after the answer
    };
    const requests = [{ path: "/" }, { path: "/" }, { path: "/?ok=1" }, { path: "/" }];
    const { theirs, mine } = await both({ limit: 1, skipFailedRequests: true, requestWasSuccessful }, requests, undefined, settled);
    expect(statuses(theirs)).toEqual([200, 200, 200, 429]);
    expect(statuses(mine)).toEqual(statuses(theirs));
  });

  it("message as an async function, an object; statusCode; an async identifier", async () => {
    for (const message of [async (req: Request) => ({ m: req.path }), { error: "x" }, "plain"]) {
      const identifier = async () => "api";
      const { theirs, mine } = await both({ limit: 1, message, statusCode: 418, standardHeaders: "draft-8", identifier }, times(2));
      expect(mine).toEqual(theirs);
    }
  });

  it("getKey and resetKey", async () => {
    const { a, b } = await both({ limit: 3 }, times(2));
    expect(await b.getKey("127.0.0.1")).toEqual(await a.getKey("127.0.0.1"));
    await a.resetKey("127.0.0.1");
    await b.resetKey("127.0.0.1");
    expect(await b.getKey("127.0.0.1")).toEqual(await a.getKey("127.0.0.1"));
  });
});

describe("a throwing user function goes to Express's error handler, as in express-rate-limit", () => {
  const boom = () => {
    throw new Error("user bug");
  };
  for (const passOnStoreError of [false, true]) {
    it(`keyGenerator, skip (passOnStoreError: ${String(passOnStoreError)})`, async () => {
      for (const fn of ["keyGenerator", "skip"]) {
        const { theirs, mine } = await both({ [fn]: boom, passOnStoreError }, times(1));
        expect(theirs[0]).toMatchObject({ status: 500, body: "error: user bug" });
        expect(mine).toEqual(theirs);
      }
    });
  }
});

describe("a keyGenerator that returns no key", () => {
  it("express-rate-limit puts every such client in one bucket; ratekeeper refuses the key with an error naming keyGenerator", async () => {
    const keyGenerator = (req: Request) => (req.query.user as string | undefined) ?? undefined;
    const { theirs, mine } = await both({ limit: 1, keyGenerator }, [{ path: "/?user=a" }, {}, {}]);
    expect(statuses(theirs)).toEqual([200, 200, 429]); // the second anonymous client is refused for the first one's request
    expect(statuses(mine)).toEqual([200, 500, 500]);
    expect(mine[1]?.body).toMatch(/^error: keyGenerator: returned undefined/);
  });

  it("an empty key is no key either", async () => {
    const { mine } = await both({ limit: 1, keyGenerator: () => "" }, times(1));
    expect(mine[0]?.status).toBe(500);
    expect(mine[0]?.body).toMatch(/^error: keyGenerator: returned "" for GET \//);
  });

  it("a number is a key: the same answers, req.rateLimit.key its text", async () => {
    const { theirs, mine } = await both({ limit: 1, keyGenerator: () => 42 }, times(2));
    expect(mine).toEqual(theirs.map((r) => ({ ...r, body: r.body.replace('"key":42', '"key":"42"') })));
  });
});

describe("a limit function's answer that is not a count is an error naming limit", () => {
  for (const bad of ["10", Number.NaN, -1, 2.5]) {
    it(`limit function returning ${String(bad)}`, async () => {
      const { mine } = await both({ limit: () => bad }, times(1));
      expect(mine[0]).toMatchObject({ status: 500 });
      expect(mine[0]?.body).toMatch(/^error: limit: the function returned/);
    });
  }
});

it("ipKeyGenerator is exported, with express-rate-limit's answers", async () => {
  const m = (await import("../src/adapters/express.js")) as Record<string, unknown>;
  const { ipKeyGenerator } = await import("express-rate-limit");
  const mine = m.ipKeyGenerator as typeof ipKeyGenerator;
  expect(typeof mine).toBe("function");
  for (const ip of ["1.2.3.4", "::1", "::", "2001:db8:abcd:1234:5678::1", "::ffff:1.2.3.4", "::1.2.3.4", "2001:DB8::1", "fe80::1%eth0"]) {
    for (const n of [undefined, 32, 64, false] as const) expect(mine(ip, n)).toBe(ipKeyGenerator(ip, n));
  }
});

describe("a failing store, passOnStoreError and the logger", () => {
  /** A ratekeeper store whose every call fails (Redis down, no failure policy of its own). */
  const broken = (): Store => ({
    bind: () => {
      const fail = () => Promise.reject(new Error("store down"));
      return { consume: fail, peek: fail, refund: fail, reset: fail };
    },
  });

  it("passOnStoreError: true lets the request through and tells the logger, by default console.error as express-rate-limit's", async () => {
    const logger = quiet();
    const b = await start(ours as Factory, { limit: 1, store: broken(), passOnStoreError: true, logger });
    expect((await observe(b.url, {})).status).toBe(200);
    expect(logger.error).toHaveBeenCalledWith(expect.objectContaining({ message: "store down" }), expect.any(String));
    const spy = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const c = await start(ours as Factory, { limit: 1, store: broken(), passOnStoreError: true });
      expect((await observe(c.url, {})).status).toBe(200);
      expect(spy).toHaveBeenCalledWith(expect.any(String), expect.objectContaining({ message: "store down" }));
    } finally {
      spy.mockRestore();
    }
  });
});

describe("options express-rate-limit 8 types besides its table", () => {
  it("retryAfter (a number, or a function of the request) sets Retry-After on a refusal", async () => {
    for (const retryAfter of [7, async (req: Request) => (req.query.slow === "1" ? 30 : 3)]) {
      const { theirs, mine } = await both({ limit: 1, retryAfter, standardHeaders: "draft-7" }, [{}, {}, { path: "/?slow=1" }]);
      expect(theirs[1]?.headers["retry-after"]).toBe(typeof retryAfter === "number" ? "7" : "3");
      expect(mine).toEqual(theirs);
    }
  });

  it("headers (legacyHeaders' old name)", async () => {
    for (const headers of [false, true]) {
      const { theirs, mine } = await both({ limit: 1, headers }, times(2));
      expect(mine).toEqual(theirs);
    }
  });
});

describe("behind a proxy Express trusts (app.set('trust proxy', ...))", () => {
  it("a forwarded address with a port (Azure App Service writes X-Forwarded-For: 1.2.3.4:5678) is the address, not a refusal", async () => {
    for (const [xff, key] of [
      ["1.2.3.4:5678", "1.2.3.4"],
      ["[2001:db8::1]:443", "2001:db8::/56"],
    ] as const) {
      const b = await start(ours as Factory, { limit: 2, onWarning: () => undefined }, "127.0.0.1", 1);
      const r = await observe(b.url, { headers: { "x-forwarded-for": xff } });
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toMatchObject({ key, used: 1 });
    }
  });

  it("forwarded addresses, spoofed entries and trust settings: the same keys and answers as express-rate-limit", async () => {
    for (const trust of [false, true, 1, 2, "loopback"]) {
      for (const xff of ["6.6.6.6, 7.7.7.7", "::ffff:1.2.3.4", "2001:db8::1, 8.8.8.8", ""]) {
        const a = await start(erl as Factory, { limit: 2, logger: quiet(), standardHeaders: "draft-8" }, "127.0.0.1", trust);
        const b = await start(ours as Factory, { limit: 2, onWarning: () => undefined, standardHeaders: "draft-8" }, "127.0.0.1", trust);
        const send = { headers: { "x-forwarded-for": xff } };
        for (let i = 0; i < 3; i++) expect(await observe(b.url, send)).toEqual(await observe(a.url, send));
      }
    }
  });
});

describe("a request the client abandons before the answer", () => {
  for (const skip of ["skipFailedRequests", "skipSuccessfulRequests"]) {
    it(`${skip}: counted or not as in express-rate-limit`, async () => {
      const a = await start(erl as Factory, { limit: 1, [skip]: true, logger: quiet() });
      const b = await start(ours as Factory, { limit: 1, [skip]: true });
      for (const url of [a.url, b.url]) {
        const at = hung;
        await httpAbandon(url, { path: "/hang" }, () => hung > at);
      }
      const key = "127.0.0.1";
      // The refund (or none) lands after the close: wait until both agree or time runs out.
      // (express-rate-limit's getKey answers { totalHits: 0 } for a key whose count went back to 0; ratekeeper's undefined.)
      const hits = async (l: Limiter) => ((await l.getKey(key)) as { totalHits: number } | undefined)?.totalHits ?? 0;
      await eventually(async () => (await hits(a.limiter)) === (await hits(b.limiter)));
      expect((await observe(b.url, {})).status).toBe((await observe(a.url, {})).status);
    });
  }
});

describe("no client address (a unix socket, no proxy header)", () => {
  /** Serves one app on a unix socket and sends one request through it. */
  let sockets = 0;
  async function overSocket(limiter: RequestHandler): Promise<number> {
    const app = express();
    app.use(limiter);
    app.get("/", (_req, res) => res.end("ok"));
    const server = createServer(app);
    listen.track(server);
    const path = join(tmpdir(), `rk-erl-${process.pid}-${++sockets}.sock`);
    await new Promise<void>((r) => server.listen(path, r));
    return new Promise((resolve, reject) => {
      http
        .get({ socketPath: path, path: "/", agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on("error", reject);
    });
  }

  it("express-rate-limit counts every such request under one key; ratekeeper refuses (403) unless noAddress: 'allow'", async () => {
    expect(await overSocket(erl({ limit: 1, logger: quiet() }))).toBe(200);
    expect(await overSocket(ours({ limit: 1, onError: () => undefined }))).toBe(403);
    expect(await overSocket(ours({ limit: 1, noAddress: "allow" }))).toBe(200);
  });
});

it("handler's fourth argument holds every option, defaults included, as in express-rate-limit", async () => {
  type Opts = Record<string, unknown> & {
    keyGenerator: (req: Request, res: Response) => unknown;
    skip: (req: Request, res: Response) => unknown;
    requestWasSuccessful: (req: Request, res: Response) => unknown;
    identifier: (req: Request, res: Response) => unknown;
  };
  const handler = async (req: Request, res: Response, _next: NextFunction, options: Opts) => {
    res.status(429).json({
      options: Object.keys(options).sort(),
      key: await options.keyGenerator(req, res),
      skip: await options.skip(req, res),
      ok: await options.requestWasSuccessful(req, res),
      id: await options.identifier(req, res),
      ipv6Subnet: options.ipv6Subnet,
      skipped: [options.skipFailedRequests, options.skipSuccessfulRequests, options.passOnStoreError],
    });
  };
  const { theirs, mine } = await both({ limit: 1, handler, validate: { ip: false } }, times(2));
  expect(mine).toEqual(theirs);
});

it("a requestWasSuccessful that throws (or rejects) is told to the logger; the server keeps serving and the request counts", async () => {
  for (const requestWasSuccessful of [
    () => {
      throw new Error("rws bug");
    },
    () => Promise.reject(new Error("rws bug")),
  ]) {
    const logger = quiet();
    const b = await start(ours as Factory, { limit: 1, skipFailedRequests: true, requestWasSuccessful, logger });
    expect((await observe(b.url, {})).status).toBe(200);
    await eventually(() => logger.error.mock.calls.length > 0);
    expect(logger.error).toHaveBeenCalledWith(expect.objectContaining({ message: "rws bug" }), expect.any(String));
    expect((await observe(b.url, {})).status).toBe(429);
  }
});

it("keyGenerator runs before the limit function, as in express-rate-limit (a limit read from what the key lookup found)", async () => {
  const plans: Record<string, number> = { a: 1, b: 2 };
  const keyGenerator = (req: Request) => {
    const user = req.query.user as string;
    (req as unknown as { plan: number }).plan = plans[user] ?? 1;
    return user;
  };
  const limit = (req: Request) => (req as unknown as { plan: number }).plan;
  const { theirs, mine } = await both({ keyGenerator, limit }, [
    { path: "/?user=a" },
    { path: "/?user=a" },
    { path: "/?user=b" },
    { path: "/?user=b" },
    { path: "/?user=b" },
  ]);
  expect(statuses(theirs)).toEqual([200, 429, 200, 200, 429]);
  expect(mine).toEqual(theirs);
});

it("the same limiter mounted twice counts a request once (express-rate-limit counts it twice), and says so once", async () => {
  const serve = async (limiter: RequestHandler) => {
    const app = express();
    app.use(limiter);
    app.use(limiter);
    app.get("/", (_req, res) => res.end("ok"));
    const url = await listen(createServer(app));
    const out = [];
    for (let i = 0; i < 3; i++) out.push((await httpRequest(url)).status);
    return out;
  };
  // (express-rate-limit's ERR_ERL_DOUBLE_COUNT check turns itself off after its first request, so it stays silent here.)
  expect(await serve(erl({ limit: 2, logger: quiet() }))).toEqual([200, 429, 429]);
  const onWarning = vi.fn();
  expect(await serve(ours({ limit: 2, onWarning }))).toEqual([200, 200, 429]);
  expect(onWarning).toHaveBeenCalledTimes(1);
  expect(onWarning).toHaveBeenCalledWith(expect.objectContaining({ code: "RK_DOUBLE_COUNT" }));
});

it("rateLimit(null) is express-rate-limit's defaults, as there", async () => {
  const { theirs, mine } = await both({}, times(6));
  const b = await start(() => ours(null as never) as unknown as Limiter, {});
  const again = [];
  for (let i = 0; i < 6; i++) again.push(await observe(b.url, {}));
  expect(mine).toEqual(theirs);
  expect(again.map((r) => r.status)).toEqual(theirs.map((r) => r.status));
});
