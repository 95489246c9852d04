/**
 * Quota leasing across a reset (docs/leasing.md, "A reset"): `reset(key)` while other processes
 * hold blocks of the key. Blocks taken before the reset were taken against the counter the reset
 * forgot; the bound after a reset is the fresh allowance plus what those blocks admit locally
 * before they end, and nothing more: their unspent units must not be given back into the fresh
 * state (that would admit them a second time, by anyone, at any time in the window).
 *
 * Several RedisStore instances (each its own instance id, as separate processes are) on one key
 * of a throw-away redis-server: A leased, holding a block; B leased, which resets; C per decision;
 * and child processes holding blocks (fixtures/lease-reset-worker.ts) on real time.
 * And on a Redis Cluster: the reset writes the epoch key next to the state, in its slot.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Redis } from "ioredis";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { RateLimiter, type LimitSpec } from "../src/index.js";
import { RedisStore, type RedisClientLike } from "../src/stores/redis/index.js";
import { Holder } from "./fixtures/holders.js";
import { redisClusterFixture } from "./redis-store-support.js";

let seq = 0;
const uniq = (tag: string) => `${tag}${process.pid}-${++seq}`;
const HOUR = 3_600_000;

const POLICIES: ReadonlyArray<[string, LimitSpec]> = [
  ["fixed-window (counter layout)", { algorithm: "fixed-window", limit: 100, window: "1h" }],
  ["fixed-window (first request)", { algorithm: "fixed-window", limit: 100, window: "1h", align: "first-request" }],
  ["token-bucket", { algorithm: "token-bucket", limit: 100, window: "1h" }],
  ["gcra", { algorithm: "gcra", limit: 100, window: "1h", burst: 99 }],
];

describeRedis("quota leasing across a reset", () => {
  let redis: RedisHandle;
  let client: Redis;
  const stores: RedisStore[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    client?.disconnect();
    await redis?.stop();
  });
  const newStore = () => {
    const s = new RedisStore({ client, failure: "throw", timeoutMs: 10_000, instances: 1 });
    stores.push(s);
    return s;
  };
  /** Admissions of `limiter` on "k" until its first denial (at most `max` tries). */
  const drain = async (limiter: RateLimiter, max = 500): Promise<number> => {
    let n = 0;
    while (n < max && (await limiter.consume("k")).allowed) n++;
    return n;
  };

  // A holds a block of 50 (it spent 21 of it) when B resets. A then spends `spent` more from
  // that block before it ends, C takes the fresh allowance, the block ends (blockMs 100 ms) and
  // everyone decides until denied. Before the reset epoch, A's give-back of its unspent units
  // went into the fresh state: up to 100 + 29 admitted whatever A spent.
  for (const [title, policy] of POLICIES) {
    for (const spent of [0, 10]) {
      it(`admits at most the fresh allowance + what A's old block spent after the reset (${title}, A spends ${spent})`, async () => {
        let now = 100 * HOUR + 1000;
        const spec = { ...policy, namespace: uniq("reset"), clock: () => now };
        const a = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 100 } });
        const b = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 100 } });
        const c = new RateLimiter({ ...spec, store: newStore() });
        expect((await a.consume("k")).allowed).toBe(true);
        // A burst at one instant: the next take asks for the demand, capped at half the limit.
        const burst = await Promise.all(Array.from({ length: 20 }, () => a.consume("k")));
        expect(burst.every((d) => d.allowed)).toBe(true);
        now += 1;
        await b.reset("k");
        let after = 0;
        for (let i = 0; i < spent; i++) if ((await a.consume("k")).allowed) after++;
        expect(after, "A's old block still serves it until its end").toBe(spent);
        after += await drain(c);
        now += 200; // A's block has ended: its next use gives its unspent units back
        for (let round = 0; round < 3; round++) {
          after += (await drain(a)) + (await drain(b)) + (await drain(c));
          now += 200;
        }
        expect(after, "admitted after the reset").toBeLessThanOrEqual(100 + spent);
        expect(after, "the fresh allowance is all there").toBeGreaterThanOrEqual(100);
      });
    }
  }

  // The bound in time: A's old block serves A until its end (blockMs from its take here: the
  // reply came at once), and not a unit after, though it never went back to Redis meanwhile.
  for (const [title, policy] of POLICIES) {
    it(`an old block serves until its end and no later (${title})`, async () => {
      const t0 = 100 * HOUR + 1000;
      let now = t0;
      const spec = { ...policy, namespace: uniq("reset-end"), clock: () => now };
      const a = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 100 } });
      const b = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 100 } });
      const c = new RateLimiter({ ...spec, store: newStore() });
      await a.consume("k");
      await Promise.all(Array.from({ length: 20 }, () => a.consume("k"))); // a block of 50 taken at t0, 20 spent
      now = t0 + 1;
      await b.reset("k");
      expect(await drain(c), "the fresh allowance").toBe(100);
      now = t0 + 99;
      for (let i = 0; i < 5; i++) expect((await a.consume("k")).allowed, `from the old block, ${i}`).toBe(true);
      now = t0 + 100;
      expect((await a.consume("k")).allowed, "the block has ended: Redis decides, and the fresh state is spent").toBe(false);
      now = t0 + 300;
      expect((await drain(a)) + (await drain(c)), "nothing came back from the old block").toBe(0);
    });
  }

  // What is left of an old block when A next takes (too little for the cost waiting) was taken
  // against the forgotten state: the take tells A the key's new epoch and A drops it, rather than
  // adding it to the new block.
  it("a take in a new epoch drops what is left of the old block", async () => {
    let now = 100 * HOUR + 1000;
    const spec = { algorithm: "fixed-window", limit: 100, window: "1h", namespace: uniq("reset-left"), clock: () => now } as const;
    const a = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 100 } });
    const b = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 100 } });
    const c = new RateLimiter({ ...spec, store: newStore() });
    await a.consume("k");
    await Promise.all(Array.from({ length: 20 }, () => a.consume("k"))); // 30 of a block of 50 left
    expect((await c.peek("k")).remaining, "51 taken").toBe(48);
    await b.reset("k");
    let units = 0;
    if ((await a.consume("k", 31)).allowed) units += 31; // more than the old block holds: a take
    for (let round = 0; round < 3; round++) {
      now += 200;
      units += (await drain(a)) + (await drain(c));
    }
    expect(units, "units admitted after the reset").toBe(100);
  });

  // The same on real time: A's block goes back by its sweep (every blockMs), not on a next use.
  it("a block given back by the sweep after a reset does not add to the fresh allowance (real time, token bucket)", async () => {
    const spec = { algorithm: "token-bucket", limit: 100, window: "1h", namespace: uniq("reset-rt") } as const;
    const a = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 50 } });
    const b = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 50 } });
    const c = new RateLimiter({ ...spec, store: newStore() });
    await a.consume("k");
    await Promise.all(Array.from({ length: 20 }, () => a.consume("k")));
    await b.reset("k");
    let after = await drain(c);
    await new Promise((resolve) => setTimeout(resolve, 250)); // A's sweep gives its block back
    after += await drain(c);
    // The bucket refills 100 an hour: at most a unit more in the test's time.
    expect(after, "admitted after the reset").toBeLessThanOrEqual(101);
  });

  // The reset wrote <key>:e from a name it made (KEYS held only the state keys): Redis's rule is
  // that a script declares every key it touches (a cluster routes by them; Dragonfly refuses
  // undeclared ones by default). Resets batched with decisions, on each algorithm that can lease.
  it.each(POLICIES)("a reset declares every key it writes, batched with other decisions (%s)", async (_title, policy) => {
    const declared = new Set<string>();
    const record = (a: unknown[]) => {
      const n = Number(a[1]);
      for (const k of a.slice(2, 2 + n)) declared.add(String(k));
    };
    const recording: RedisClientLike = {
      evalsha: (...a: Parameters<Redis["evalsha"]>) => (record(a), client.evalsha(...a)),
      eval: (...a: Parameters<Redis["eval"]>) => (record(a), client.eval(...a)),
      del: (...keys: string[]) => client.del(...keys),
    };
    const namespace = uniq("reset-keys");
    const store = new RedisStore({ client: recording, failure: "throw", timeoutMs: 10_000, instances: 1 });
    stores.push(store);
    const limiter = new RateLimiter({ ...policy, namespace, store });
    await Promise.all([limiter.consume("a"), limiter.consume("b"), limiter.consume("c")]);
    await Promise.all([limiter.reset("a"), limiter.consume("b"), limiter.reset("c"), limiter.consume("d")]);
    const written = await client.keys(`*${namespace}*`);
    expect(written.filter((k) => k.endsWith(":e")).length, "the epoch keys of a and c").toBe(2);
    for (const k of written) expect(declared.has(k), `${k} declared`).toBe(true);
  });

  // Two other processes hold blocks when this one resets: one spends 10 more from its block, the
  // other nothing; their blocks end (3 s: worker's blockMs) and their sweeps give them back.
  it("child processes holding blocks: at most the fresh allowance + what their old blocks spent after the reset", async () => {
    const namespace = uniq("reset-child");
    const worker = fileURLToPath(new URL("./fixtures/lease-reset-worker.ts", import.meta.url));
    const children = await Promise.all([0, 1].map(() => Holder.start({ port: redis.port, namespace }, worker)));
    try {
      for (const child of children) {
        child.send({ type: "hold" });
        await child.next("held");
      }
      const spec = { algorithm: "token-bucket", limit: 100, window: "1h", namespace } as const;
      const b = new RateLimiter({ ...spec, store: newStore(), lease: { blockMs: 500 } });
      const c = new RateLimiter({ ...spec, store: newStore() });
      await b.reset("k");
      const [one] = children as [Holder, Holder];
      one.send({ type: "spend", n: 10 });
      const spentOld = (await one.next<{ admitted: number }>("spent")).admitted;
      expect(spentOld, "from its old block, which has not ended").toBe(10);
      let after = spentOld + (await drain(c));
      await new Promise((resolve) => setTimeout(resolve, 3500)); // their blocks end (3 s) and go back
      after += await drain(c);
      for (const child of children) {
        child.send({ type: "spend", n: 50 });
        after += (await child.next<{ admitted: number }>("spent")).admitted;
      }
      // What a child's sweep has not given back yet (its timers run late on a saturated machine)
      // comes back a little later: until all of it is admitted, C keeps draining (a condition
      // polled, no timing asserted; the upper bound below must hold whenever it is read).
      for (let i = 0; i < 100 && after < 100 + spentOld; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        after += await drain(c);
      }
      // The bucket refills 100 an hour: at most a unit more in the test's time.
      expect(after, "admitted after the reset").toBeLessThanOrEqual(100 + spentOld + 1);
      expect(after).toBeGreaterThanOrEqual(100 + spentOld);
    } finally {
      await Promise.all(children.map((child) => child.stop()));
    }
  });
});

describeRedis("quota leasing across a reset, on a Redis Cluster", () => {
  const fx = redisClusterFixture();

  // The reset's script writes <key>:e, a key it is not given (its KEYS are the state keys): the
  // same hash tag puts it in the state's slot, on the master the call went to.
  it("keys on every master: the reset raises the epoch there, and the old block gives nothing back", async () => {
    let now = 100 * HOUR + 1000;
    const stores = [0, 1, 2].map(() => new RedisStore({ client: fx.client, failure: "throw", timeoutMs: 10_000, instances: 1 }));
    const spec = { algorithm: "token-bucket", limit: 100, window: "1h", namespace: uniq("reset-cluster"), clock: () => now } as const;
    const [a, b, c] = [
      new RateLimiter({ ...spec, store: stores[0] as RedisStore, lease: { blockMs: 100 } }),
      new RateLimiter({ ...spec, store: stores[1] as RedisStore, lease: { blockMs: 100 } }),
      new RateLimiter({ ...spec, store: stores[2] as RedisStore }),
    ];
    for (let i = 0; i < 12; i++) {
      const key = `k${i}`;
      await a.consume(key);
      await Promise.all(Array.from({ length: 20 }, () => a.consume(key)));
      await b.reset(key);
      let after = 0;
      while (after < 500 && (await c.consume(key)).allowed) after++;
      now += 200;
      while (after < 500 && ((await a.consume(key)).allowed || (await c.consume(key)).allowed)) after++;
      expect(after, `admitted after the reset of ${key}`).toBe(100);
    }
    await Promise.all(stores.map((s) => s.close()));
  });
});
