/**
 * The `"degraded"` policy through an outage and its charge to Redis, for the buckets (token and
 * leaky bucket, GCRA with a burst), a fixed window, and costs above 1, in one process and in two processes (two
 * RedisStores, `instances: 2`) limiting one key while Redis is down and charging it together when
 * it answers again. The contract: Redis afterwards holds what was admitted locally, up to the
 * capacity, and the key gets no fresh allowance right after the outage; what the key is given
 * over a stretch of time stays within what Redis had left plus the local shares (a bucket: its
 * capacity plus its refill over that stretch).
 *
 * A real redis-server behind clients whose every call fails while `ctl.down` (outageClient), on
 * an injected clock: the outage's times are chosen, not timed.
 */
import { Redis } from "ioredis";
import { afterAll, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { describeRedis } from "../../../test-support/redis.js";
import { RateLimiter, type Decision, type LimitSpec } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { outageClient, redisStoreFixture } from "./redis-store-support.js";

const MINUTE = 60_000;
/** A minute's boundary: the injected clock starts there. */
const T0 = Math.ceil(Date.now() / MINUTE) * MINUTE;

describeRedis("degraded: buckets and costs through an outage and its charge", () => {
  const fx = redisStoreFixture();
  const clients: Redis[] = [];
  afterAll(() => clients.forEach((c) => c.disconnect()));

  /**
   * `processes` stores on the fixture's server (each on a connection of its own, as separate
   * processes would be), `instances` of them counted by the policy, all down while `ctl.down`;
   * a limiter of `spec` on each, in one namespace, on the clock `clock.now`.
   */
  function setup(spec: LimitSpec, processes: number, instances = processes) {
    const ctl = { down: false };
    const clock = { now: T0 };
    const namespace = `algos-${process.pid}-${Math.random().toString(36).slice(2)}`;
    const procs = Array.from({ length: processes }, () => {
      const io = new Redis(fx.redis.port, fx.redis.host);
      clients.push(io);
      const { client, inFlight } = outageClient(io, ctl);
      const store = new RedisStore({ client, instances, timeoutMs: 1_000 });
      const limiter = new RateLimiter({ ...spec, store, namespace, clock: () => clock.now });
      return { store, limiter, inFlight };
    });
    return { ctl, clock, procs };
  }

  /** Consumes `cost` at `at` until the first denial (at most 100 times): the units admitted, and that denial. */
  async function admitAll(limiter: RateLimiter, clock: { now: number }, at: number, cost = 1): Promise<[number, Decision]> {
    clock.now = at;
    for (let n = 0; n < 100; n++) {
      const d = await limiter.consume("k", cost);
      if (!d.allowed) return [n * cost, d];
    }
    throw new Error("never denied");
  }

  // 10 a minute, 10 at once; with two instances a local share of 5, refilled at 5 a minute.
  const buckets: Array<[string, LimitSpec]> = [
    ["token bucket", { algorithm: "token-bucket", limit: 10, window: MINUTE, capacity: 10 }],
    ["GCRA with a burst", { algorithm: "gcra", limit: 10, window: MINUTE, burst: 9 }],
    ["leaky bucket", { algorithm: "leaky-bucket", limit: 10, window: MINUTE, capacity: 10 }],
  ];
  for (const [name, spec] of buckets) {
    it(`${name}, two processes degraded on one key, charged together: within capacity + refill`, async () => {
      const { ctl, clock, procs } = setup(spec, 2);
      ctl.down = true;
      let given = 0;
      // The outage: each process alone at its share of 5 (cost 2: 4 units), then 30 s later
      // its share refilled by 2.5 (one more cost of 2). A cost above the share: denied.
      for (const { limiter } of procs) {
        expect(await admitAll(limiter, clock, T0, 2)).toMatchObject([4, { reason: "degraded" }]);
        expect(await limiter.consume("k", 6)).toMatchObject({ allowed: false, reason: "degraded" });
      }
      for (const { limiter } of procs) {
        const [units, d] = await admitAll(limiter, clock, T0 + MINUTE / 2, 2);
        expect(d.reason).toBe("degraded");
        given += 4 + units;
      }
      // In those 30 s the key may be given its capacity (10) plus half a minute's refill (5).
      expect(given).toBeLessThanOrEqual(15);
      expect(given).toBe(12);
      // Redis answers: both processes charge their 6 units at once, at T0 + 30 s. Redis, full
      // (10), takes 6 from one and the 4 it has room for from the other.
      ctl.down = false;
      const drained = async () => {
        if (procs.some((p) => p.inFlight() > 0)) return false;
        const ds = await Promise.all(procs.map((p) => p.limiter.peek("k")));
        return ds.every((d) => !d.allowed && d.reason === "limit");
      };
      await until(drained, "both charges taken, Redis empty", 100, 20);
      // Right after: nothing more for the key, from either process.
      for (const { limiter } of procs) expect(await admitAll(limiter, clock, T0 + MINUTE / 2)).toMatchObject([0, { reason: "limit" }]);
      // Redis refills at the whole limit again: one unit 6 s later, for either process.
      expect(await admitAll(procs[1]!.limiter, clock, T0 + MINUTE / 2 + 6_000)).toMatchObject([1, { reason: "limit" }]);
      expect(await admitAll(procs[0]!.limiter, clock, T0 + MINUTE / 2 + 6_000)).toMatchObject([0, { reason: "limit" }]);
      await Promise.all(procs.map((p) => p.store.close()));
    });
  }

  it("fixed window, two processes degraded on one key, charged together: Redis before + 2 shares", async () => {
    const { ctl, clock, procs } = setup({ algorithm: "fixed-window", limit: 10, window: MINUTE }, 2);
    clock.now = T0;
    for (let i = 0; i < 3; i++) expect(await procs[0]!.limiter.consume("k")).toMatchObject({ allowed: true });
    // Redis admitted 3 of 10; then each process alone at its share of 5 (costs of 2, then 1).
    ctl.down = true;
    for (const { limiter } of procs) {
      expect(await admitAll(limiter, clock, T0 + 1_000, 2)).toMatchObject([4, { reason: "degraded" }]);
      expect(await admitAll(limiter, clock, T0 + 1_000)).toMatchObject([1, { reason: "degraded" }]);
    }
    // Redis answers: the two charges of 5 find room for 7: Redis holds the window full.
    ctl.down = false;
    const full = async () => {
      if (procs.some((p) => p.inFlight() > 0)) return false;
      const ds = await Promise.all(procs.map((p) => p.limiter.peek("k")));
      return ds.every((d) => !d.allowed && d.reason === "limit");
    };
    await until(full, "both charges taken, the window full", 100, 20);
    for (const { limiter } of procs) expect(await admitAll(limiter, clock, T0 + 2_000)).toMatchObject([0, { reason: "limit" }]);
    // The next window: Redis's 10, between the two processes.
    const [a] = await admitAll(procs[0]!.limiter, clock, T0 + MINUTE, 3);
    const [b] = await admitAll(procs[1]!.limiter, clock, T0 + MINUTE);
    expect([a, b]).toEqual([9, 1]);
    await Promise.all(procs.map((p) => p.store.close()));
  });

  it("GCRA with a burst, costs of 3: Redis is charged up to its room, and gives nothing right after", async () => {
    const { ctl, clock, procs } = setup({ algorithm: "gcra", limit: 10, window: MINUTE, burst: 9 }, 1);
    const { limiter, inFlight } = procs[0]!;
    clock.now = T0;
    for (let i = 0; i < 2; i++) expect(await limiter.consume("k", 2)).toMatchObject({ allowed: true, reason: undefined });
    // Redis had 6 left; alone (one instance), the process's share is the whole burst: 9 of 10.
    ctl.down = true;
    expect(await admitAll(limiter, clock, T0, 3)).toMatchObject([9, { reason: "degraded" }]);
    // Redis answers: the 9 units are charged at T0; it takes the 6 it has room for.
    ctl.down = false;
    const full = async () => {
      const d = await limiter.peek("k");
      return inFlight() === 0 && !d.allowed && d.reason === "limit";
    };
    await until(full, "the charge taken", 100, 20);
    expect(await admitAll(limiter, clock, T0)).toMatchObject([0, { reason: "limit" }]);
    // Redis had no room for 3 of the units: the key keeps its local state (9 of its share of 10
    // used), and Redis going again at once gives it the last unit of that share, not a fresh one.
    ctl.down = true;
    expect(await admitAll(limiter, clock, T0)).toMatchObject([1, { reason: "degraded" }]);
    await procs[0]!.store.close();
  });

  it("token bucket, costs of 4: Redis holds the 8 units admitted locally; the key has 2 left", async () => {
    const { ctl, clock, procs } = setup({ algorithm: "token-bucket", limit: 10, window: MINUTE, capacity: 10 }, 1);
    const { limiter, inFlight } = procs[0]!;
    ctl.down = true;
    expect(await admitAll(limiter, clock, T0, 4)).toMatchObject([8, { reason: "degraded" }]);
    ctl.down = false;
    // An admitted peek reports what would be left after it: 10 - 8 - 1.
    const charged = async () => {
      const d = await limiter.peek("k");
      return inFlight() === 0 && d.reason === undefined && d.remaining === 1;
    };
    await until(charged, "the charge taken", 100, 20);
    expect(await limiter.consume("k", 4)).toMatchObject({ allowed: false, reason: "limit", remaining: 2 });
    expect(await admitAll(limiter, clock, T0, 2)).toMatchObject([2, { reason: "limit" }]);
    await procs[0]!.store.close();
  });
});
