/**
 * Two middlewares given one store and the same limits, without a namespace, count in the same
 * counters: the namespace defaults to the limits, so that every server's copy of a policy shares
 * its counters. In one process that is rarely meant (a login limiter and an API limiter with the
 * same numbers: a request through both is counted twice in one counter, and each limits the
 * other's routes). express-rate-limit warns about a store given to two limiters
 * (ERR_ERL_STORE_REUSE); ratekeeper warns `RK_STORE_REUSE` when counters would actually meet,
 * once per middleware, and never when the user named the namespace (sharing chosen).
 */
import { createServer } from "node:http";
import express from "express";
import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { rateLimit as expressLimit } from "../src/adapters/express.js";
import { rateLimitPlugin } from "../src/adapters/fastify.js";
import { rateLimit as honoLimit } from "../src/adapters/hono.js";
import { rateLimit as nodeLimit } from "../src/adapters/node.js";
import type { RateLimitWarning } from "../src/http/core.js";
import { RateLimiter } from "../src/limiter.js";
import { httpRequest, loopbackServers } from "./http-support.js";

const listen = loopbackServers();

const limits = [{ algorithm: "fixed-window" as const, limit: 5, window: "1m" as const }];

/** A warning sink: the codes it was told. */
function sink() {
  const warnings: RateLimitWarning[] = [];
  return { warnings, onWarning: (w: RateLimitWarning) => warnings.push(w), codes: () => warnings.map((w) => w.code) };
}

describe("ratekeeper's own options", () => {
  it("warns when a second middleware would count in the first one's counters", () => {
    const store = new MemoryStore();
    const a = sink();
    const b = sink();
    expressLimit({ limits, store, onWarning: a.onWarning });
    expressLimit({ limits, store, onWarning: b.onWarning });
    expect(a.codes()).toEqual([]);
    expect(b.codes()).toEqual(["RK_STORE_REUSE"]);
    expect(b.warnings[0]?.message).toMatch(/namespace/);
    expect(b.warnings[0]?.message).toMatch(/unsharedStore: false/);
  });

  it("warns for one options object given to two middlewares", () => {
    const s = sink();
    const options = { limits, store: new MemoryStore(), onWarning: s.onWarning };
    nodeLimit(options);
    nodeLimit(options);
    expect(s.codes()).toEqual(["RK_STORE_REUSE"]);
  });

  it("warns across frameworks: the counters are the store's", async () => {
    const store = new MemoryStore();
    const s = sink();
    honoLimit({ limits, store });
    const app = Fastify();
    await app.register(rateLimitPlugin, { limits, store, onWarning: s.onWarning });
    await app.ready();
    await app.close();
    expect(s.codes()).toEqual(["RK_STORE_REUSE"]);
  });

  it("warns for two concurrency limits with one store and the same limit: they would share leases", () => {
    const store = new MemoryStore();
    const s = sink();
    nodeLimit({ concurrency: { limit: 3, store }, onWarning: s.onWarning });
    nodeLimit({ concurrency: { limit: 4, store }, onWarning: s.onWarning });
    nodeLimit({ concurrency: { limit: 3, store, namespace: "uploads" }, onWarning: s.onWarning });
    expect(s.codes()).toEqual([]);
    nodeLimit({ concurrency: { limit: 3, store }, onWarning: s.onWarning });
    expect(s.codes()).toEqual(["RK_STORE_REUSE"]);
    expect(s.warnings[0]?.message).toMatch(/concurrency\.namespace/);
  });

  it("stays silent when the counters cannot meet, or when sharing was chosen", () => {
    const store = new MemoryStore();
    const s = sink();
    expressLimit({ limits, store, onWarning: s.onWarning });
    // Other limits: another namespace.
    expressLimit({ limits: [{ ...limits[0]!, limit: 6 }], store, onWarning: s.onWarning });
    // Another store.
    expressLimit({ limits, store: new MemoryStore(), onWarning: s.onWarning });
    // The namespace named: both chose it.
    expressLimit({ limits, store, namespace: "shared", onWarning: s.onWarning });
    expressLimit({ limits, store, namespace: "shared", onWarning: s.onWarning });
    // One limiter given to two middlewares: shared on purpose.
    const limiter = new RateLimiter({ limits, store });
    expressLimit({ limiter, onWarning: s.onWarning });
    expressLimit({ limiter, onWarning: s.onWarning });
    // Each middleware's own default store.
    expressLimit({ limits, onWarning: s.onWarning });
    expressLimit({ limits, onWarning: s.onWarning });
    // The check turned off.
    expressLimit({ limits, store, onWarning: s.onWarning, validate: { unsharedStore: false } });
    expressLimit({ limits, store, onWarning: s.onWarning, validate: false });
    expect(s.codes()).toEqual([]);
  });
});

describe("express-rate-limit's options", () => {
  it("warns as express-rate-limit's ERR_ERL_STORE_REUSE, when the counters meet", () => {
    const store = new MemoryStore();
    const s = sink();
    const app = express();
    app.use("/login", expressLimit({ windowMs: 60_000, limit: 5, store, onWarning: s.onWarning }));
    expect(s.codes()).toEqual([]);
    app.use("/api", expressLimit({ windowMs: 60_000, limit: 5, store, onWarning: s.onWarning }));
    expect(s.codes()).toEqual(["RK_STORE_REUSE"]);
  });

  it("is turned off by validate: { unsharedStore: false }, as in express-rate-limit", () => {
    const store = new MemoryStore();
    const s = sink();
    expressLimit({ windowMs: 60_000, limit: 5, store, onWarning: s.onWarning });
    expressLimit({ windowMs: 60_000, limit: 5, store, onWarning: s.onWarning, validate: { unsharedStore: false } });
    expect(s.codes()).toEqual([]);
  });

  it("does not warn about one limiter's own limit values, made again after being let go", async () => {
    const s = sink();
    // A limit per client: more values than the limiters kept (256), so the first are made again.
    const mw = expressLimit({
      windowMs: 60_000,
      limit: (req: express.Request) => 1 + Number(req.headers["x-n"]),
      keyGenerator: (req: express.Request) => `${String(req.headers["x-n"])}:${String(req.headers["x-round"])}`,
      store: new MemoryStore(),
      onWarning: s.onWarning,
    });
    const url = await listen(
      createServer(
        express()
          .use(mw)
          .get("/", (_req, res) => res.end("ok")),
      ),
    );
    for (let round = 0; round < 2; round++) {
      for (let n = 0; n < 300; n++)
        expect((await httpRequest(url, { headers: { "x-n": String(n), "x-round": String(round) } })).status).toBe(200);
    }
    expect(s.codes()).toEqual([]);
  });
});
