/**
 * What callers and observers see while a RedisStore's circuit breaker is open, with no
 * redis-server: a client whose every command fails. Once the breaker is open no call is made and
 * the failure policy answers at once; the outage is told once (`onStateChange`), not per decision
 * (`onError`); a `"throw"` caller gets a `RateLimitStoreError` of its own for every call, whose
 * message and cause say the breaker is open; `stats()` reads as before. For each policy, batched
 * or not, on one limit (the script's fast path) and on several (the general path).
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStore, RateLimiter, RateLimitStoreError, type Decision, type LimitSpec } from "../src/index.js";
import { RedisStore, type BreakerEvent, type RedisErrorContext, type RedisFailurePolicy } from "../src/stores/redis/index.js";

const LIMIT = 20;
const HOUR = 3_600_000;
const DOWN = "Redis is down (circuit breaker open)";
type PolicyName = "degraded" | "insurance" | "open" | "closed" | "throw";

/**
 * An ioredis-like client whose every command rejects as a closed connection does. `status`
 * "reconnecting": the store opens its breaker before its first call; "ready": after the calls
 * that fail in a row.
 */
function deadClient(status: "reconnecting" | "ready") {
  const calls = { n: 0 };
  const down = () => {
    calls.n++;
    return Promise.reject(new Error("Connection is closed."));
  };
  return { client: { status, evalsha: down, eval: down, evalshaBuffer: down, evalBuffer: down, del: down }, calls };
}

const stores: RedisStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

function setup(policy: PolicyName, o: { status?: "reconnecting" | "ready"; batch?: boolean; several?: boolean } = {}) {
  const { client, calls } = deadClient(o.status ?? "reconnecting");
  const failure: RedisFailurePolicy = policy === "insurance" ? { insurance: new MemoryStore() } : policy;
  const events: BreakerEvent[] = [];
  const errors: Array<{ error: RateLimitStoreError; ctx: RedisErrorContext }> = [];
  const store = new RedisStore({
    client,
    failure,
    instances: 2,
    batch: o.batch ?? true,
    onStateChange: (e) => events.push(e),
    onError: (error, ctx) => errors.push({ error, ctx }),
  });
  stores.push(store);
  const hourly: LimitSpec = { algorithm: "fixed-window", limit: LIMIT, window: HOUR };
  const limits: LimitSpec[] = o.several ? [hourly, { algorithm: "sliding-log", limit: LIMIT * 10, window: HOUR * 24 }] : [hourly];
  const limiter = new RateLimiter({ limits, store, namespace: "open-breaker" });
  return { store, limiter, events, errors, calls };
}

/** `n` consumes of `key` one after another: each decision, or the error it rejected with. */
async function consumes(limiter: RateLimiter, key: string, n: number): Promise<Array<Decision | Error>> {
  const out: Array<Decision | Error> = [];
  for (let i = 0; i < n; i++) out.push(await limiter.consume(key).catch((e: Error) => e));
  return out;
}

/** The error a promise rejected with (fails the test when it resolved). */
async function rejection(p: Promise<unknown>): Promise<RateLimitStoreError> {
  const r = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(r).toBeInstanceOf(RateLimitStoreError);
  return r as RateLimitStoreError;
}

/** A rejection of a "throw" call made while the breaker is open. */
function expectBreakerOpenError(e: RateLimitStoreError): void {
  expect(e.name).toBe("RateLimitStoreError");
  expect(e.code).toBe("ERR_RATEKEEPER_STORE");
  expect(e.message).toBe(DOWN);
  expect(e.stack).toMatch(/^RateLimitStoreError: Redis is down \(circuit breaker open\)/);
  expect(e.cause).toBeInstanceOf(Error);
  expect((e.cause as Error).name).toBe("RedisDownError");
  expect((e.cause as Error).message).toBe(DOWN);
  expect(String((e.cause as Error).stack)).toMatch(/^RedisDownError: Redis is down \(circuit breaker open\)/);
}

const SHAPES = [
  { title: "one limit, batched", batch: true, several: false },
  { title: "one limit, unbatched", batch: false, several: false },
  { title: "two limits, batched", batch: true, several: true },
  { title: "two limits, unbatched", batch: false, several: true },
];

describe.each(SHAPES)("breaker open ($title)", ({ batch, several }) => {
  it.each(["degraded", "insurance", "open", "closed"] as const)("%s answers every decision, reporting the outage once", async (policy) => {
    const { store, limiter, events, errors, calls } = setup(policy, { batch, several });
    const during = (await consumes(limiter, "k", 30)) as Decision[];
    const peeked = await limiter.peek("k");
    await limiter.refund("k", 1);
    await limiter.reset("other");

    const reason = policy === "degraded" ? "degraded" : policy === "insurance" ? "insurance" : "store-error";
    expect(new Set([...during, peeked].map((d) => d.reason))).toEqual(new Set([reason]));
    const allowed = during.filter((d) => d.allowed).length;
    expect(allowed).toBe({ degraded: LIMIT / 2, insurance: LIMIT, open: 30, closed: 0 }[policy]);
    if (policy === "closed") expect(during.every((d) => d.retryAfterMs === 1000)).toBe(true);

    // The connection was known lost: the breaker opened before any call, and none was made
    // but the breaker's own probes (at most one by now, on a slow machine).
    expect(calls.n).toBeLessThanOrEqual(1);
    expect(events[0]).toEqual({ from: "closed", to: "open", cause: "connection lost" });
    expect(events.map((e) => e.to)).not.toContain("closed");
    expect(errors).toEqual([]);
    expect(store.stats()).toMatchObject({ pending: 0, overloaded: 0, instances: 2, unreconciled: 0 });
    expect(store.stats().state).not.toBe("closed");
  });

  it("throw: every call rejects with an error of its own saying the breaker is open", async () => {
    const { limiter, errors } = setup("throw", { batch, several });
    const during = await consumes(limiter, "k", 5);
    for (const e of during) expectBreakerOpenError(e as RateLimitStoreError);
    expect(new Set(during).size).toBe(5); // never one shared object a caller could change for the next
    expectBreakerOpenError(await rejection(limiter.peek("k")));
    expectBreakerOpenError(await rejection(limiter.refund("k", 1)));
    expectBreakerOpenError(await rejection(limiter.reset("k")));
    expect(errors).toEqual([]);
  });
});

describe("breaker opened by failed calls", () => {
  it.each(["degraded", "throw"] as const)(
    "%s: each failed call is reported with its cause; none once the breaker is open",
    async (policy) => {
      const { store, limiter, events, errors } = setup(policy, { status: "ready" });
      const during = await consumes(limiter, "k", 8);
      // Three errors in a row open the breaker (breaker.ts); each was a call Redis failed.
      expect(errors).toHaveLength(3);
      for (const { error, ctx } of errors) {
        expect(error).toBeInstanceOf(RateLimitStoreError);
        expect(error.message).toBe('RedisStore consume "k": Connection is closed.');
        expect((error.cause as Error).message).toBe("Connection is closed.");
        expect(ctx).toEqual({ op: "consume", key: "k", timedOut: false });
      }
      expect(events[0]).toEqual({ from: "closed", to: "open", cause: "Connection is closed." });
      expect(store.stats()).toMatchObject({ pending: 0, overloaded: 0, instances: 2, unreconciled: 0 });
      if (policy === "degraded") {
        expect(during.map((d) => (d as Decision).reason)).toEqual(Array(8).fill("degraded"));
        return;
      }
      // "throw": the failed calls' rejections are the reported errors; then the breaker's own.
      during.slice(0, 3).forEach((e, i) => expect(e).toBe(errors[i]?.error));
      for (const e of during.slice(3)) expectBreakerOpenError(e as RateLimitStoreError);
    },
  );
});
