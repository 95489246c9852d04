/**
 * Options given as a Map, Set, Date or class instance where an object literal is expected. Their
 * entries are no own properties, so read as options they looked like `{}`: every default applied,
 * silently. `cost: new Map([["POST /login", 10]])` priced the login at 1 (ten times the attempts
 * the app meant to allow); `new MemoryStore(new Map([["maxKeys", 1000]]))` kept its default of a
 * million keys. Now each is refused naming the field and what it got ("got a Map"), as the
 * `lease` option already was.
 */
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { ConcurrencyLimiter, MemoryStore, RateLimitConfigError, RateLimiter } from "../../src/index.js";
import { rateLimit as expressRateLimit } from "../../src/adapters/express.js";
import { rateLimit as nodeRateLimit } from "../../src/adapters/node.js";
import { resolveRedisOptions } from "../../src/stores/redis/options.js";
import { resolveHttpRedisOptions } from "../../src/stores/redis-http/options.js";

const limit = { algorithm: "fixed-window", limit: 5, window: "1m" } as const;
const map = (o: object) => new Map(Object.entries(o));
/** A client shaped like ioredis's, enough for the options check. */
const client = { evalsha: () => undefined, eval: () => undefined, defineCommand: () => undefined, status: "ready" };
const httpClient = { eval: () => undefined, evalsha: () => undefined };

/** The message `build` throws, or "" when it accepts what it was given. */
function refusal(build: () => unknown): string {
  try {
    build();
    return "";
  } catch (e) {
    return (e as Error).message;
  }
}

describe("an options object that is not a plain one is refused, naming the field", () => {
  it("the middleware's cost table, validate and options: a Map is refused (it read as an empty table, every route at cost 1)", () => {
    const m = refusal(() => nodeRateLimit({ limits: [limit], cost: map({ "POST /login": 3 }) as never }));
    expect(m).toBe("cost: must be a number, a table or a function (got a Map)");
    expect(refusal(() => nodeRateLimit({ limits: [limit], validate: map({ trustProxy: false }) as never }))).toMatch(
      /^validate: must be true, false or \{.*\} \(got a Map\)$/,
    );
    expect(refusal(() => nodeRateLimit(map({ limits: [limit] }) as never))).toBe("options: must be an object (got a Map)");
    // Object literals are tables and options, as before.
    expect(refusal(() => nodeRateLimit({ limits: [limit], cost: { "POST /login": 3 }, validate: { trustProxy: false } }))).toBe("");
  });

  it("ratekeeper/express: options and express-rate-limit's validate given as a Map are refused", () => {
    expect(refusal(() => expressRateLimit(map({ windowMs: 1000, limit: 5 }) as never))).toBe(
      "rateLimit: options must be an object literal (got a Map)",
    );
    expect(refusal(() => expressRateLimit({ windowMs: 1000, limit: 5, validate: map({ trustProxy: false }) as never }))).toMatch(
      /validate: must be true, false or an object \(got a Map\)/,
    );
    expect(refusal(() => expressRateLimit({ windowMs: 1000, limit: 5, validate: { trustProxy: false } }))).toBe("");
  });

  it("MemoryStore, RateLimiter, ConcurrencyLimiter: a Map, Set, Date or class instance is refused", () => {
    for (const [value, kind] of [
      [map({ maxKeys: 1000 }), "a Map"],
      [new Set(), "a Set"],
      [new Date(0), "a Date"],
      [new (class StoreOptions {})(), "a StoreOptions"],
    ] as const) {
      expect(refusal(() => new MemoryStore(value as never))).toBe(`options: must be an object (got ${kind})`);
      expect(refusal(() => new RateLimiter(value as never))).toBe(`options: must be an object (got ${kind})`);
      expect(refusal(() => new ConcurrencyLimiter(value as never))).toBe(`options: must be an object with a limit (got ${kind})`);
    }
    expect(refusal(() => new RateLimiter({ limits: [map(limit) as never] }))).toBe("limits[0]: must be an object (got a Map)");
    // Plain objects, with or without a prototype, are options.
    expect(refusal(() => new MemoryStore(Object.assign(Object.create(null) as object, { maxKeys: 1000 })))).toBe("");
    expect(refusal(() => new MemoryStore({ maxKeys: 1000 }))).toBe("");
  });

  it("RedisStore's denialCache and batch, and both Redis stores' options: a Map is refused", () => {
    const issues = (o: unknown) => {
      try {
        resolveRedisOptions(o as never);
        return [];
      } catch (e) {
        return (e as RateLimitConfigError).issues.map((i) => `${i.path}: ${i.message}`);
      }
    };
    expect(issues({ client, denialCache: map({ maxKeys: 5 }) })).toEqual(["denialCache: must be true, false or { maxKeys } (got a Map)"]);
    expect(issues({ client, batch: map({ maxBatch: 5 }) })).toEqual(["batch: must be true, false or { maxBatch } (got a Map)"]);
    expect(issues({ client, denialCache: { maxKeys: 5 }, batch: { maxBatch: 5 } })).toEqual([]);
    expect(refusal(() => resolveRedisOptions(map({ client }) as never))).toBe("options: must be an object with a client (got a Map)");
    expect(refusal(() => resolveHttpRedisOptions(map({ client: httpClient }) as never))).toBe(
      "options: must be an object with a client (got a Map)",
    );
  });

  it("an object literal made in another realm (a vm context, as some sandboxes and test runners make them) is one", () => {
    const options = runInNewContext("({ maxKeys: 1000, limits: [{ algorithm: 'fixed-window', limit: 5, window: '1m' }] })") as {
      maxKeys: number;
      limits: unknown[];
    };
    expect(refusal(() => new MemoryStore({ maxKeys: options.maxKeys }))).toBe("");
    expect(refusal(() => new MemoryStore(runInNewContext("({ maxKeys: 1000 })") as object))).toBe("");
    expect(refusal(() => new RateLimiter({ limits: options.limits as never }))).toBe("");
    // Its Map is still a Map.
    expect(refusal(() => new MemoryStore(runInNewContext("new Map([['maxKeys', 1000]])") as object))).toMatch(/got a Map/);
  });
});
