/**
 * ConcurrencyLimiter on Redis: the leases the failure policy grants locally while Redis does not
 * answer ("degraded", insurance), and what becomes of them. Their renew and release stay with the
 * local table that holds them, by key and id; once Redis answers again they are handed to Redis,
 * so that Redis counts them and grants no slot they hold. Outages are cued (a client whose calls
 * fail while `ctl.down` is set); the real server keeps running.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { ConcurrencyLimiter, MemoryStore } from "../src/index.js";
import { RedisStore, type RedisFailurePolicy } from "../src/stores/redis/index.js";
import { until } from "../../../test-support/process.js";
import { outageClient } from "./redis-store-support.js";

let seq = 0;

describeRedis("ConcurrencyLimiter: leases granted locally while Redis was down", () => {
  let redis: RedisHandle;
  let io: Redis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    io = new Redis(redis.port, redis.host);
    admin = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    io?.disconnect();
    admin?.disconnect();
    await redis?.stop();
  });

  function pool(limit: number, failure: RedisFailurePolicy = "degraded", timeoutMs = 5_000, instances = 1) {
    const ctl = { down: false };
    const { client } = outageClient(io, ctl);
    const store = new RedisStore({ client, failure, timeoutMs, instances });
    const namespace = `loc${process.pid}-${++seq}`;
    const p = new ConcurrencyLimiter({ limit, leaseMs: 3_600_000, store, namespace });
    return { p, ctl, store, namespace, zkey: (key: string) => `${store.prefix}{${namespace}:${key}}:c` };
  }

  describe.each(["degraded", "insurance"] as const)("%s", (policy) => {
    const failure = (): RedisFailurePolicy => (policy === "degraded" ? "degraded" : { insurance: new MemoryStore({ sweepIntervalMs: 0 }) });

    it("a release naming another key does not unhook the lease: its own release still frees the local slot", async () => {
      const { p, ctl } = pool(1, failure());
      await p.peek("warm"); // loads the script
      ctl.down = true;
      const a = await p.acquire("a");
      expect(a).toMatchObject({ acquired: true, reason: policy });
      expect(await p.release("b", a.id)).toBe(false); // the id is per key: nothing held on "b"
      expect(await p.release("a", a.id)).toBe(true);
      expect(await p.acquire("a")).toMatchObject({ acquired: true, reason: policy });
    });

    it("once Redis answers again, a lease granted locally is counted there: its slot is not granted again; its renew and release go to Redis", async () => {
      const { p, ctl, store, zkey } = pool(2, failure());
      const a = await p.acquire("k");
      expect(a).toMatchObject({ acquired: true, reason: undefined });
      ctl.down = true;
      const b = await p.acquire("k");
      expect(b).toMatchObject({ acquired: true, reason: policy });
      for (let i = 0; i < 3; i++) await p.peek("k"); // enough failures to open the breaker
      expect(store.state).toBe("open");
      ctl.down = false; // its probe closes it
      // Without the hand-over Redis knows of a alone and grants a third lease on a limit of 2.
      await until(async () => (await admin.zcard(zkey("k"))) === 2, "the local lease to be handed to Redis", 200, 10);
      expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
      const score = Number(await admin.zscore(zkey("k"), b.id));
      expect(await b.renew()).toBe(true);
      expect(Number(await admin.zscore(zkey("k"), b.id))).toBeGreaterThanOrEqual(score);
      await b.release();
      expect(await admin.zscore(zkey("k"), b.id)).toBeNull();
      expect(await p.acquire("k")).toMatchObject({ acquired: true, reason: undefined });
      await a.release();
    });

    it("an acquire on a key with a lease granted locally hands that lease to Redis first: no slot it holds is granted in between", async () => {
      const { p, ctl, zkey } = pool(1, failure());
      await p.peek("warm");
      ctl.down = true;
      const a = await p.acquire("k"); // one failed call: the breaker stays closed
      expect(a).toMatchObject({ acquired: true, reason: policy });
      ctl.down = false;
      // Redis answers again at once; the hand-over would come a moment later.
      expect(await p.peek("k")).toMatchObject({ remaining: 0, reason: undefined }); // what an acquire would say
      expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
      expect(await admin.zscore(zkey("k"), a.id)).not.toBeNull();
      await a.release();
      expect((await p.acquire("k")).acquired).toBe(true);
    });

    it("an acquire Redis took too late, after the policy granted the same lease locally, ends up held once, in Redis", async () => {
      const { p, zkey } = pool(1, failure(), 200);
      await p.peek("warm"); // loads the script
      await admin.call("CLIENT", "PAUSE", "600", "WRITE");
      const b = await p.acquire("k");
      expect(b).toMatchObject({ acquired: true, reason: policy });
      // Redis runs the late acquire once the pause ends; its reply closes the breaker, and the
      // local lease is handed over: the late grant must not be given back after the hand-over.
      await until(
        async () => (await p.acquire("k")).reason === "limit" && (await admin.zcard(zkey("k"))) === 1,
        "Redis to hold the lease",
        200,
        10,
      );
      await p.peek("k"); // on the same connection: a give-back sent before it has run
      expect(await admin.zscore(zkey("k"), b.id)).not.toBeNull();
      expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
      await b.release();
      expect(await admin.zcard(zkey("k"))).toBe(0);
      expect((await p.acquire("k")).acquired).toBe(true);
    });

    it("a lease handed to Redis keeps what was left of its life, even past the limit", async () => {
      const { p, ctl, namespace, zkey } = pool(1, failure());
      await p.peek("warm");
      ctl.down = true;
      const b = await p.acquire("k"); // local: Redis does not know of it
      ctl.down = false;
      // Another process, which Redis answered all along: an empty key, so granted (the outage's worst case).
      const elsewhere = new ConcurrencyLimiter({
        limit: 1,
        leaseMs: 3_600_000,
        namespace,
        store: new RedisStore({ client: io, failure: "throw", instances: 1 }),
      });
      const a = await elsewhere.acquire("k");
      expect([a.acquired, b.acquired]).toEqual([true, true]);
      await until(async () => (await admin.zcard(zkey("k"))) === 2, "the local lease to be handed to Redis", 200, 10);
      // Both are held: nothing more is granted until both are gone.
      expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
      await a.release();
      expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
      const left = Number(await admin.zscore(zkey("k"), b.id)) - Date.now();
      expect(left).toBeGreaterThan(3_500_000);
      expect(left).toBeLessThanOrEqual(3_600_000 + 1_000);
      await b.release();
      expect((await p.acquire("k")).acquired).toBe(true);
    });
  });

  it('"degraded" with fewer slots than instances: a share of 0, every acquire refused, so N processes never hold more than the limit', async () => {
    // 3 instances sharing a limit of 2 (a share rounded up to 1 each would let the 3 hold 3).
    const { p, ctl } = pool(2, "degraded", 5_000, 3);
    await p.peek("warm");
    ctl.down = true;
    expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "degraded", retryAfterMs: 1000 });
    expect(await p.peek("k")).toMatchObject({ remaining: 0, reason: "degraded" });
    // A limit of 3 over 3 instances: a share of 1 each.
    const three = pool(3, "degraded", 5_000, 3);
    await three.p.peek("warm");
    three.ctl.down = true;
    const got = [await three.p.acquire("k"), await three.p.acquire("k")];
    expect(got.map((l) => [l.acquired, l.reason])).toEqual([
      [true, "degraded"],
      [false, "limit"],
    ]);
  });

  it('"open": a lease granted without Redis is handed to it too once it answers, so a holder that keeps renewing it is counted', async () => {
    const { p, ctl, zkey } = pool(1, "open");
    const a = await p.acquire("k");
    ctl.down = true;
    const b = await p.acquire("k");
    expect(b).toMatchObject({ acquired: true, reason: "store-error" });
    ctl.down = false;
    await until(async () => (await admin.zcard(zkey("k"))) === 2, "the open lease to be handed to Redis", 200, 10);
    await a.release();
    expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
    expect(await b.renew()).toBe(true);
    await b.release();
    expect(await admin.zcard(zkey("k"))).toBe(0);
  });

  describe.each(["degraded", "open"] as const)("%s: a renew the policy said true to", (failure) => {
    function clocked() {
      const ctl = { down: false };
      const store = new RedisStore({ client: outageClient(io, ctl).client, failure, timeoutMs: 5_000, instances: 1 });
      const clock = { now: 1_763_740_800_000 };
      const namespace = `loc${process.pid}-${++seq}`;
      const p = new ConcurrencyLimiter({ limit: 1, leaseMs: 10_000, store, namespace, clock: () => clock.now });
      return { p, ctl, clock, zkey: `${store.prefix}{${namespace}:k}:c` };
    }

    it("is made in Redis once it answers: the slot is not granted again while the holder still holds it", async () => {
      const { p, ctl, clock, zkey } = clocked();
      const t0 = clock.now;
      const a = await p.acquire("k"); // held in Redis until t0 + 10 s
      ctl.down = true;
      clock.now = t0 + 8_000;
      expect(await a.renew()).toBe(true); // the policy answers: the holder goes on until t0 + 18 s
      ctl.down = false;
      await until(async () => Number(await admin.zscore(zkey, a.id)) === t0 + 18_000, "the renew to reach Redis", 200, 10);
      clock.now = t0 + 13_000;
      expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
      expect(await a.renew()).toBe(true);
      await a.release();
      expect((await p.acquire("k")).acquired).toBe(true);
    });

    it("a lease that expired in Redis meanwhile is taken again if its slot is free", async () => {
      const { p, ctl, clock, zkey } = clocked();
      const t0 = clock.now;
      const a = await p.acquire("k");
      ctl.down = true;
      clock.now = t0 + 8_000;
      expect(await a.renew()).toBe(true);
      clock.now = t0 + 12_000;
      await p.peek("k"); // the latest reading: the time Redis is told of the renew at
      ctl.down = false;
      await until(async () => Number(await admin.zscore(zkey, a.id)) === t0 + 18_000, "the renew to reach Redis", 200, 10);
      expect(await p.acquire("k")).toMatchObject({ acquired: false, reason: "limit" });
    });
  });

  it("a lease granted locally is renewed and released by id through another limiter of its namespace (a service reload's new limiter)", async () => {
    const ctl = { down: false };
    const store = new RedisStore({ client: outageClient(io, ctl).client, failure: "degraded", timeoutMs: 5_000, instances: 1 });
    const namespace = `loc${process.pid}-${++seq}`;
    const before = new ConcurrencyLimiter({ limit: 1, leaseMs: 3_600_000, store, namespace });
    const after = new ConcurrencyLimiter({ limit: 2, leaseMs: 3_600_000, store, namespace }); // the limit raised by a reload
    await before.peek("warm");
    ctl.down = true;
    const a = await before.acquire("k");
    expect(a).toMatchObject({ acquired: true, reason: "degraded" });
    expect(await after.renew("k", a.id)).toBe(true);
    expect(await after.release("k", a.id)).toBe(true);
    expect(await before.acquire("k")).toMatchObject({ acquired: true, reason: "degraded" }); // the slot is free again
    ctl.down = false;
    const zkey = `${store.prefix}{${namespace}:k}:c`;
    await until(async () => (await admin.zcard(zkey)) === 1, "the remaining local lease to be handed to Redis", 200, 10);
    expect(await admin.zscore(zkey, a.id)).toBeNull(); // the released one is not brought back
  });

  describe.each(["degraded", "closed", "open"] as const)("%s: a release Redis did not get", (failure) => {
    it("is sent again once Redis answers: the slot comes back then, not when the lease expires", async () => {
      const { p, ctl, zkey } = pool(1, failure);
      const a = await p.acquire("k");
      expect(a.acquired).toBe(true);
      ctl.down = true;
      await a.release(); // the policy answers: nothing reached Redis
      expect(await admin.zcard(zkey("k"))).toBe(1);
      ctl.down = false;
      await until(async () => (await admin.zcard(zkey("k"))) === 0, "the release to reach Redis", 200, 10);
      expect(await p.acquire("k")).toMatchObject({ acquired: true, reason: undefined });
    });
  });

  it("random acquires and releases with lone failed calls among them: Redis never grants a lease while this process holds the limit", async () => {
    // One process, limit 3 on two keys, "degraded" at the full limit (one instance). Calls fail
    // one or two at a time (the breaker stays closed), so leases are granted locally now and
    // then and handed over in the background or by the next acquire on their key. Whatever the
    // interleaving, a lease Redis grants (reason undefined) must find fewer than 3 held.
    const { p, ctl } = pool(3, "degraded");
    await p.peek("warm");
    let seed = 7;
    const rnd = () => (seed = (seed * 16_807) % 2_147_483_647) / 2_147_483_647;
    const held = new Map<string, Awaited<ReturnType<ConcurrencyLimiter["acquire"]>>[]>([
      ["a", []],
      ["b", []],
    ]);
    let redisGrants = 0;
    let localGrants = 0;
    for (let i = 0; i < 400; i++) {
      const key = rnd() < 0.5 ? "a" : "b";
      const mine = held.get(key) as Awaited<ReturnType<ConcurrencyLimiter["acquire"]>>[];
      const r = rnd();
      ctl.down = r < 0.12; // this call fails (at most one in a row but for the next turn's)
      if (r < 0.6) {
        const before = mine.length;
        const lease = await p.acquire(key);
        if (lease.acquired) {
          if (lease.reason === undefined) {
            expect(before, `Redis granted a lease on "${key}" with ${before} held (step ${i})`).toBeLessThan(3);
            redisGrants++;
          } else localGrants++;
          mine.push(lease);
        }
      } else if (mine.length > 0) {
        const lease = mine.splice(Math.floor(rnd() * mine.length), 1)[0];
        await lease?.release();
      }
      ctl.down = false;
      if (rnd() < 0.05)
        await new Promise((r) => setTimeout(r, 120)); // a background reconciliation may run
      else await new Promise((r) => setImmediate(r));
    }
    expect(redisGrants).toBeGreaterThan(20);
    expect(localGrants).toBeGreaterThan(3);
  });
});
