/**
 * Outages of a real redis-server, for every failure policy: kill -9 (then a restart with an empty
 * data set), SIGSTOP / SIGCONT (a frozen server that keeps its connections and its data), and a
 * graceful stop and restart. For each: the breaker opens (at once when the client reports the
 * connection lost, after `timeoutMs` of silence when the server is frozen); while it is open the
 * policy answers at once; after recovery Redis decides again within about a second; what the
 * `"degraded"` policy admitted locally is charged to Redis; a reply that came back after the
 * policy answered is refunded (never counted twice); nothing leaks an unhandled rejection.
 */
import { once } from "node:events";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { describeRedis, rawCommand, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { MemoryStore, RateLimiter, RateLimitStoreError, type Decision } from "../src/index.js";
import { RedisStore, type BreakerEvent, type RedisClientLike, type RedisFailurePolicy } from "../src/stores/redis/index.js";
import { failNextClient } from "./redis-store-support.js";

const HOUR = 3_600_000;
const LIMIT = 20;
/** The store's timeout in these tests: short, so a frozen server is noticed quickly. */
const TIMEOUT_MS = 300;

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

type Fault = "kill -9" | "SIGSTOP" | "stop and restart";
type PolicyName = "degraded" | "open" | "closed" | "throw" | "insurance";

describeRedis("outage: a real redis-server fails under traffic", () => {
  let redis: RedisHandle;
  let unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  const cleanups: Array<() => Promise<unknown> | void> = [];

  beforeAll(async () => {
    redis = await startRedis();
    process.on("unhandledRejection", onUnhandled);
  });
  afterAll(async () => {
    process.off("unhandledRejection", onUnhandled);
    redis?.resume();
    await redis?.stop();
  });
  beforeEach(async () => {
    unhandled = [];
    redis.resume();
    if (!(await rawCommand(redis.port, ["PING"]).catch(() => ""))) await redis.restart();
  });
  afterEach(async () => {
    for (const close of cleanups.splice(0)) await close();
    // Give late replies and reconnect timers a moment to surface any unhandled rejection.
    await new Promise((r) => setTimeout(r, 100));
    expect(unhandled).toEqual([]);
  });

  /** An ioredis client with its defaults (offline queue on), reconnecting every 50 ms. */
  async function ioredis(): Promise<Redis> {
    const io = new Redis(redis.port, redis.host, { retryStrategy: () => 50 });
    io.on("error", () => undefined); // connection errors are events; the store sees failed calls
    cleanups.push(() => io.disconnect());
    await once(io, "ready");
    return io;
  }

  async function setup(policy: PolicyName, client?: RedisClientLike, batch = true) {
    const c = client ?? (await ioredis());
    const failure: RedisFailurePolicy = policy === "insurance" ? { insurance: new MemoryStore() } : policy;
    const events: BreakerEvent[] = [];
    const errors: RateLimitStoreError[] = [];
    const store = new RedisStore({
      client: c,
      failure,
      timeoutMs: TIMEOUT_MS,
      instances: 2, // "degraded": this process limits at LIMIT / 2 while Redis is down
      onStateChange: (e) => events.push(e),
      onError: (e) => errors.push(e),
      batch,
    });
    cleanups.push(() => store.close());
    const limiter = new RateLimiter({
      algorithm: "fixed-window",
      limit: LIMIT,
      window: HOUR,
      align: "first-request",
      store,
      namespace: `out-${Math.random().toString(36).slice(2)}`,
    });
    return { store, limiter, events, errors };
  }

  /** `n` consumes one after another; each decision (or its error) with how long it took. */
  async function timed(limiter: RateLimiter, key: string, n: number): Promise<Array<{ d?: Decision; err?: unknown; ms: number }>> {
    const out: Array<{ d?: Decision; err?: unknown; ms: number }> = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      try {
        const d = await limiter.consume(key);
        out.push({ d, ms: performance.now() - t0 });
      } catch (err) {
        out.push({ err, ms: performance.now() - t0 });
      }
    }
    return out;
  }

  async function fault(f: Fault): Promise<void> {
    if (f === "kill -9") await redis.kill9();
    else if (f === "SIGSTOP") redis.pause();
    else await redis.stop();
  }

  async function heal(f: Fault): Promise<void> {
    if (f === "SIGSTOP") redis.resume();
    else await redis.restart();
  }

  /** How many units of `key` Redis holds now (a peek that Redis itself answers). */
  async function used(limiter: RateLimiter, key: string): Promise<number> {
    const d = await limiter.peek(key);
    if (d.reason !== undefined && d.reason !== "limit") throw new Error(`peek answered by ${d.reason}`);
    // An admitted peek reports what would be left after it (its own unit included).
    return LIMIT - d.remaining - (d.allowed ? 1 : 0);
  }

  const POLICIES: PolicyName[] = ["degraded", "open", "closed", "throw", "insurance"];
  const FAULTS: Fault[] = ["kill -9", "SIGSTOP", "stop and restart"];

  // Unbatched (`batch: false`), each decision is its own script call in flight (fast-op.ts): the
  // watchdog must give each up, and the late replies of a frozen server must be refunded.
  const CASES: Array<[string, Fault, boolean]> = [
    ...FAULTS.map((f): [string, Fault, boolean] => [f, f, true]),
    ["SIGSTOP, batch: false", "SIGSTOP", false],
  ];
  for (const [title, fname, batch] of CASES) {
    describe(title, () => {
      it.each(POLICIES)("failure %s", async (policy) => {
        const { store, limiter, events } = await setup(policy, undefined, batch);
        const before = await timed(limiter, "k", 5);
        expect(before.map((r) => r.d?.reason)).toEqual([undefined, undefined, undefined, undefined, undefined]);

        await fault(fname);
        const during = await timed(limiter, "k", 30);
        expect(store.state).toBe("open");
        expect(events.map((e) => e.to)).toContain("open");

        // Only decisions sent before the breaker opened may wait, and never much past the timeout;
        // once it is open the policy answers at once.
        const firstFromPolicy = during.findIndex((r) => r.err !== undefined || r.d?.reason !== undefined);
        expect(firstFromPolicy).toBe(0);
        expect(during[0]!.ms).toBeLessThan(TIMEOUT_MS * 1.25 + 1000);
        for (const r of during.slice(1)) expect(r.ms).toBeLessThan(TIMEOUT_MS);

        const allowed = during.filter((r) => r.d?.allowed).length;
        const reasons = new Set(during.map((r) => (r.err !== undefined ? "error" : r.d?.reason)));
        switch (policy) {
          case "degraded":
            expect([...reasons]).toEqual(["degraded"]);
            expect(allowed).toBe(LIMIT / 2); // this process's share; N processes admit at most LIMIT together
            break;
          case "open":
            expect([...reasons]).toEqual(["store-error"]);
            expect(allowed).toBe(30);
            break;
          case "closed":
            expect([...reasons]).toEqual(["store-error"]);
            expect(allowed).toBe(0);
            expect(during.every((r) => r.d?.retryAfterMs === 1000)).toBe(true);
            break;
          case "throw":
            expect([...reasons]).toEqual(["error"]);
            expect(during.every((r) => r.err instanceof RateLimitStoreError)).toBe(true);
            break;
          case "insurance":
            expect([...reasons]).toEqual(["insurance"]);
            expect(allowed).toBe(LIMIT); // the insurance store limits this process at the full limit
            break;
        }

        await heal(fname);
        const healedAt = performance.now();
        await until("Redis to decide again", async () => {
          const d = await limiter.peek("probe");
          return d.reason === undefined ? d : undefined;
        });
        // The probe runs every 100-500 ms and the client reconnects every 50 ms.
        expect(performance.now() - healedAt).toBeLessThan(3_000);
        expect(store.state).toBe("closed");

        // What Redis holds for the key: kept through a freeze, lost with the server otherwise; plus,
        // for "degraded", what this process admitted alone (reconciled). Late replies to the calls
        // the policy answered were refunded: nothing is counted twice.
        const kept = fname === "SIGSTOP" ? 5 : 0;
        const expected = kept + (policy === "degraded" ? LIMIT / 2 : 0);
        let seen: number | string = "nothing";
        await until(`Redis to hold ${expected} units (holds ${seen})`, async () => {
          seen = await used(limiter, "k").catch((e: Error) => e.message);
          return seen === expected ? true : undefined;
        }).catch((e: Error) => {
          throw new Error(`${e.message}; last seen: ${seen}`);
        });
        // It stays there (no late refund or charge still on its way changes it).
        await new Promise((r) => setTimeout(r, 300));
        expect(await used(limiter, "k")).toBe(expected);
      });
    });
  }

  it("the default timeout (1 s) and a frozen server: the first decision waits at most about that long", async () => {
    const client = await ioredis();
    const store = new RedisStore({ client, failure: "closed" });
    const limiter = new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", store, namespace: "default-timeout" });
    await limiter.consume("k");
    redis.pause();
    const t0 = performance.now();
    const d = await limiter.consume("k");
    const waited = performance.now() - t0;
    expect([d.allowed, d.reason]).toEqual([false, "store-error"]);
    expect(waited).toBeGreaterThanOrEqual(900);
    expect(waited).toBeLessThan(1_250 + 1_000);
    redis.resume();
    await until("Redis to decide again", async () => ((await limiter.peek("k")).reason === undefined ? true : undefined));
  });

  it("degraded: an admission made on one failed call, the breaker still closed, is charged to Redis all the same", async () => {
    // One error short of opening the breaker (a Cluster slot whose master just died gives such
    // errors): no closing of the breaker follows, yet the admission must reach Redis.
    const io = await ioredis();
    const { client: flaky, failNext } = failNextClient(() => io);
    const { store, limiter } = await setup("degraded", flaky);
    await timed(limiter, "k", 1);
    failNext();
    const [r] = await timed(limiter, "k", 1);
    expect([r?.d?.allowed, r?.d?.reason]).toEqual([true, "degraded"]);
    expect(store.state).toBe("closed");
    await until("the degraded admission to be charged", async () => ((await used(limiter, "k")) === 2 ? true : undefined), 2_000);
  });

  it("node-redis: the breaker opens on a lost connection and closes when Redis is back", async () => {
    const client = createClient({ url: redis.url, socket: { reconnectStrategy: () => 50 } });
    client.on("error", () => undefined); // node-redis emits connection errors as events
    await client.connect();
    cleanups.push(() => client.destroy());
    const { store, limiter } = await setup("closed", client);
    await timed(limiter, "k", 1);
    await redis.kill9();
    const during = await timed(limiter, "k", 3);
    expect(during.every((r) => !r.d?.allowed && r.d?.reason === "store-error")).toBe(true);
    expect(store.state).toBe("open");
    await redis.restart();
    await until("Redis to decide again", async () => ((await limiter.peek("probe")).reason === undefined ? true : undefined));
    expect(await used(limiter, "k")).toBe(0);
  });

  it("300 decisions in flight (batched) when the server freezes: each is answered by the policy, none lost, none charged", async () => {
    const { limiter, errors } = await setup("closed");
    await timed(limiter, "k0", 1);
    redis.pause();
    const ds = await Promise.all(Array.from({ length: 300 }, (_, i) => limiter.consume(`k${i % 7}`)));
    expect(ds.every((d) => !d.allowed && d.reason === "store-error")).toBe(true);
    expect(errors.length).toBeGreaterThan(0);
    redis.resume();
    await until("Redis to decide again", async () => ((await limiter.peek("probe")).reason === undefined ? true : undefined));
    // The calls that reached the frozen server ran when it woke; their admissions were refunded.
    for (let i = 0; i < 7; i++) {
      await until(`k${i} back to what it held`, async () => ((await used(limiter, `k${i}`)) === (i === 0 ? 1 : 0) ? true : undefined));
    }
  });
});
