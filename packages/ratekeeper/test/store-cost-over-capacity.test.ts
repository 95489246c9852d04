/**
 * A cost larger than the policy could ever admit, asked of a store directly: the same requests
 * through `MemoryStore.bind()`, `RedisStore.bind()` (batched and not) and `HttpRedisStore.bind()`
 * (through the real `@upstash/redis` client and test-support/redis-rest.ts), for every algorithm,
 * consume and peek, one limit and several. A store's `bind()` is public (`BoundStore`: custom
 * stores and adapters call it), so the store itself keeps the contract DESIGN.md gives such a
 * cost: bad input, refused with RateLimiter's own RangeError ("cost: N is more than this policy
 * could ever admit (at most M)", M being RateLimiter's `maxCost`), before any state is touched:
 * no key made (memory or Redis), nothing charged, nothing reported, no failure policy. A cost of
 * exactly M still decides as before, and every store gives the same decisions after the refusal
 * as a twin key that was never asked.
 */
import { Redis as Upstash } from "@upstash/redis";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startRedisRest, type RedisRestHandle } from "../../../test-support/redis-rest.js";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { resolveLease } from "../src/core/lease-options.js";
import { MemoryStore, RateLimiter, resolveLimits, type BoundStore, type Decision, type LimitSpec } from "../src/index.js";
import { HttpRedisStore } from "../src/stores/redis-http/index.js";
import { RedisStore } from "../src/stores/redis/index.js";

const T0 = 1_764_236_401_237;
const W = 60_000;

const CASES: [string, LimitSpec[]][] = [
  ["fixed window", [{ algorithm: "fixed-window", limit: 5, window: W }]],
  ["fixed window, first-request", [{ algorithm: "fixed-window", limit: 5, window: W, align: "first-request" }]],
  ["sliding tail", [{ algorithm: "sliding-window", limit: 5, window: W }]],
  ["sliding tail, unpacked", [{ algorithm: "sliding-window", limit: 40_000, window: W }]],
  ["sliding window, 4 sub-windows", [{ algorithm: "sliding-window", limit: 5, window: W, buckets: 4 }]],
  ["sliding window, 4 unweighted", [{ algorithm: "sliding-window", limit: 5, window: W, buckets: 4, weighted: false }]],
  ["sliding window, 100 sub-windows", [{ algorithm: "sliding-window", limit: 5, window: W, buckets: 100 }]],
  ["sliding log", [{ algorithm: "sliding-log", limit: 5, window: W }]],
  ["sliding log of 200", [{ algorithm: "sliding-log", limit: 200, window: W }]],
  ["token bucket, capacity 8", [{ algorithm: "token-bucket", limit: 5, window: W, capacity: 8 }]],
  ["token bucket, capacity 3", [{ algorithm: "token-bucket", limit: 5, window: W, capacity: 3 }]],
  ["leaky bucket (meter)", [{ algorithm: "leaky-bucket", limit: 5, window: W, capacity: 4 }]],
  ["leaky bucket (queue)", [{ algorithm: "leaky-bucket", limit: 5, window: W, capacity: 4, mode: "shape" }]],
  ["gcra, burst 2", [{ algorithm: "gcra", limit: 5, window: W, burst: 2 }]],
  ["gcra, burst 0", [{ algorithm: "gcra", limit: 5, window: W }]],
  [
    "fixed window 10 and gcra burst 2",
    [
      { algorithm: "fixed-window", limit: 10, window: W },
      { algorithm: "gcra", limit: 5, window: W, burst: 2 },
    ],
  ],
  [
    "sliding log 3 and fixed window 1000",
    [
      { algorithm: "sliding-log", limit: 3, window: W },
      { algorithm: "fixed-window", limit: 1000, window: W },
    ],
  ],
  [
    "token bucket 8 and sliding window 5 of 4",
    [
      { algorithm: "token-bucket", limit: 5, window: W, capacity: 8 },
      { algorithm: "sliding-window", limit: 5, window: W, buckets: 4 },
    ],
  ],
  [
    "leaky queue 4 and sliding tail 6",
    [
      { algorithm: "leaky-bucket", limit: 5, window: W, capacity: 4, mode: "shape" },
      { algorithm: "sliding-window", limit: 6, window: W },
    ],
  ],
];

/** A decision's numbers, or the error's name and text. */
async function answer(f: () => Decision | Promise<Decision>): Promise<unknown> {
  try {
    const d = await f();
    return [d.allowed, d.remaining, d.retryAfterMs, d.resetAfterMs, d.delayMs ?? 0];
  } catch (e) {
    return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
}

interface Under {
  /** A store bound to `limits` under `namespace`. */
  bind(limits: ReturnType<typeof resolveLimits>, namespace: string): BoundStore;
  /** What the store holds for `namespace`: its keys and their values (Redis), or the store's size and bytes (memory). */
  held(namespace: string): Promise<unknown>;
}

let seq = 0;

describeRedis("a cost above the policy's capacity, asked of each store directly", () => {
  let redis: RedisHandle;
  let rest: RedisRestHandle;
  let io: Redis;
  let admin: Redis;
  const errors: Error[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    rest = await startRedisRest(redis.port);
    io = new Redis(redis.port, redis.host);
    admin = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    io?.disconnect();
    admin?.disconnect();
    await rest?.close();
    await redis?.stop();
  });

  const inRedis = async (namespace: string, key = "") => (await admin.keys(`rk:{${namespace}:${key}*`)).sort();
  const redisHeld = async (namespace: string) => {
    const keys = await inRedis(namespace);
    return Promise.all(keys.map(async (k) => [k, (await admin.dumpBuffer(k)).toString("hex")]));
  };
  const redisStore = (batch: boolean) =>
    new RedisStore({ client: io, failure: "open", batch, instances: 1, timeoutMs: 60_000, onError: (e) => errors.push(e) });
  const stores: [string, () => Under][] = [
    [
      "memory",
      () => {
        const m = new MemoryStore({ sweepIntervalMs: 0 });
        return { bind: (l, ns) => m.bind(l, ns), held: () => Promise.resolve([m.size, m.bytes]) };
      },
    ],
    ["RedisStore", () => ({ bind: (l, ns) => redisStore(true).bind(l, ns), held: redisHeld })],
    ["RedisStore, batch: false", () => ({ bind: (l, ns) => redisStore(false).bind(l, ns), held: redisHeld })],
    [
      "HttpRedisStore",
      () => {
        const s = new HttpRedisStore({
          client: new Upstash({ url: rest.url, token: rest.token }),
          failure: "open",
          timeoutMs: 60_000,
          onError: (e) => errors.push(e),
        });
        return { bind: (l, ns) => s.bind(l, ns), held: redisHeld };
      },
    ],
  ];

  for (const [name, specs] of CASES) {
    it(`${name}: every store refuses it as RateLimiter does, touching nothing; a cost of exactly the capacity still decides`, async () => {
      const limits = resolveLimits(specs);
      const max = new RateLimiter({ limits: specs }).maxCost;
      const refusal = (cost: number) => `RangeError: cost: ${cost} is more than this policy could ever admit (at most ${max})`;
      const costs = [max + 1, 3 * max + 7, 2 ** 40];
      const want: Record<string, unknown> = {};
      const got: Record<string, unknown> = {};
      const after: Record<string, { asked: unknown; twin: unknown }> = {};
      errors.length = 0;
      for (const [storeName, make] of stores) {
        const under = make();
        const ns = `over-${++seq}`;
        const b = under.bind(limits, ns);
        const twin = under.bind(limits, `${ns}-twin`);
        for (const s of [b, twin]) {
          await answer(() => s.consume("k", 1, T0));
          await answer(() => s.consume("k", 1, T0 + 10));
        }
        const before = await under.held(ns);
        const refused: unknown[] = [];
        for (const cost of costs) {
          for (const key of ["k", "fresh"]) {
            refused.push(await answer(() => b.consume(key, cost, T0 + 20)));
            refused.push(await answer(() => b.consume(key, cost, T0 + 20, 1_000)));
            refused.push(await answer(() => b.peek(key, cost, T0 + 20)));
          }
        }
        // Refused, and nothing written (no key made for one never seen before).
        got[storeName] = { refused, held: await under.held(ns) };
        want[storeName] = { refused: costs.flatMap((c) => Array<string>(6).fill(refusal(c))), held: before };
        // Then the same answers as the twin never asked, a cost of exactly the capacity included.
        const follow = async (s: BoundStore) => [
          await answer(() => s.peek("k", 1, T0 + 30)),
          await answer(() => s.consume("k", 1, T0 + 30)),
          await answer(() => s.consume("fresh", max, T0 + 40)),
          await answer(() => s.peek("fresh", 1, T0 + 40)),
          await answer(() => s.consume("k", max, T0 + 10 * W)),
        ];
        after[storeName] = { asked: await follow(b), twin: await follow(twin) };
      }
      expect(got, "the refused calls' answers, and what each store held after them").toEqual(want);
      const first = after.memory as { twin: unknown };
      for (const [storeName] of stores) {
        const a = after[storeName] as { asked: unknown; twin: unknown };
        expect(a.asked, `${storeName}: after the refusals, as the twin never asked`).toEqual(a.twin);
        expect(a.twin, `${storeName}: the same decisions as the memory store's`).toEqual(first.twin);
      }
      expect(errors.map((e) => e.message)).toEqual([]);
    });
  }

  it("RedisStore's denial cache, holding a denial of the key, does not answer it", async () => {
    const specs: LimitSpec[] = [{ algorithm: "fixed-window", limit: 2, window: W }];
    const store = new RedisStore({ client: io, failure: "open", instances: 1, timeoutMs: 60_000, denialCache: true });
    const b = store.bind(resolveLimits(specs), `cache-${++seq}`);
    const ds = [];
    for (let i = 0; i < 3; i++) ds.push(await b.consume("k", 1, T0 + i));
    expect(ds.map((d) => d.allowed)).toEqual([true, true, false]);
    for (const op of ["consume", "peek"] as const) {
      expect(await answer(() => b[op]("k", 3, T0 + 5)), op).toBe(
        "RangeError: cost: 3 is more than this policy could ever admit (at most 2)",
      );
    }
  });

  it("quota leasing (RedisStore.bind with a lease) refuses it before taking a block", async () => {
    for (const spec of [
      { algorithm: "fixed-window", limit: 5, window: W },
      { algorithm: "gcra", limit: 5, window: W, burst: 2 },
      { algorithm: "token-bucket", limit: 5, window: W, capacity: 3 },
    ] satisfies LimitSpec[]) {
      const limits = resolveLimits([spec]);
      const lease = resolveLease(true, limits, []);
      const max = new RateLimiter(spec).maxCost;
      const ns = `lease-${++seq}`;
      const b = redisStore(true).bind(limits, ns, { lease });
      for (const op of ["consume", "peek"] as const) {
        expect(await answer(() => b[op]("k", max + 1, T0)), `${spec.algorithm} ${op}`).toBe(
          `RangeError: cost: ${max + 1} is more than this policy could ever admit (at most ${max})`,
        );
      }
      expect(await inRedis(ns), spec.algorithm).toEqual([]);
      expect((await b.consume("k", max, T0)).allowed, `${spec.algorithm}: a cost of the capacity`).toBe(true);
    }
  });
});
