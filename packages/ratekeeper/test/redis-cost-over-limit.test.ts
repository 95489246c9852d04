/**
 * A cost above a sliding log's limit, asked of a RedisStore directly (`RedisStore.bind()` is
 * public, as `MemoryStore.bind()` is: custom stores and adapters call the `BoundStore` interface).
 * ratekeeper.lua takes `cost <= limit` as given: its sliding log read the unit `limit - cost + 1`
 * positions back, past the log, where a log not yet full has no bytes, and the script's error was
 * taken for a foreign value: onError said "a key holds a value this store did not write ...
 * delete that key" of a key holding our own log, and the failure policy answered (`"open"`:
 * admitted, a cost no window admits). The store refuses the cost before asking Redis, with
 * RateLimiter's RangeError, as every store refuses a cost above any algorithm's capacity
 * (store-cost-over-capacity.test.ts): nothing reported, nothing written, no policy.
 */
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { resolveLimits, type LimitSpec } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { HttpRedisStore } from "../src/stores/redis-http/index.js";

const T0 = 1_764_236_401_237;

describeRedis("a cost above a sliding log's limit, asked of a RedisStore directly", () => {
  const fx = redisStoreFixture();
  let n = 0;

  const cases: [string, LimitSpec[]][] = [
    ["one sliding log of 3", [{ algorithm: "sliding-log", limit: 3, window: 60_000 }]],
    ["one sliding log of 200", [{ algorithm: "sliding-log", limit: 200, window: 60_000 }]],
    [
      "a sliding log of 3 beside a fixed window of 1000",
      [
        { algorithm: "sliding-log", limit: 3, window: 60_000 },
        { algorithm: "fixed-window", limit: 1000, window: 60_000 },
      ],
    ],
  ];
  for (const [name, specs] of cases) {
    for (const batch of [true, false]) {
      it(`${name}${batch ? "" : ", batch: false"}: refused (RangeError), nothing reported or written, no failure policy`, async () => {
        const client = new Redis(fx.redis.port, fx.redis.host);
        try {
          const errors: Error[] = [];
          const store = new RedisStore({ client, failure: "open", batch, onError: (e) => errors.push(e) });
          const namespace = `col-${++n}`;
          const limits = resolveLimits(specs);
          const b = store.bind(limits, namespace);
          for (let i = 0; i < 2; i++) expect((await b.consume("a", 1, T0 + i)).allowed).toBe(true);
          const key = `rk:{${namespace}:a}${specs.length > 1 ? ":0" : ""}`;
          const before = await fx.admin.getBuffer(key);
          const log = limits[0]?.limit as number;
          for (const cost of [log + 1, log + 5]) {
            for (const op of ["consume", "peek"] as const) {
              const answer = await Promise.resolve(b[op]("a", cost, T0 + 500)).then(
                (d) => d,
                (e: unknown) => e,
              );
              expect(answer, `${op} of cost ${cost}`).toEqual(
                new RangeError(`cost: ${cost} is more than this policy could ever admit (at most ${log})`),
              );
            }
          }
          expect(errors.map((e) => e.message)).toEqual([]);
          expect(await fx.admin.getBuffer(key)).toEqual(before);
          expect((await b.consume("a", 1, T0 + 600)).remaining).toBe(log - 3);
        } finally {
          client.disconnect();
        }
      });
    }
  }
});

describe("the same cost asked of an HttpRedisStore directly", () => {
  it("refused (RangeError) before Redis is asked", async () => {
    const asked: string[] = [];
    const client = {
      eval: (_s: string, keys: string[]) => (asked.push(keys.join(",")), Promise.resolve(null)),
      evalsha: (_s: string, keys: string[]) => (asked.push(keys.join(",")), Promise.resolve(null)),
    };
    const b = new HttpRedisStore({ client, failure: "open" }).bind(
      resolveLimits([{ algorithm: "sliding-log", limit: 3, window: 60_000 }]),
      "h",
    );
    for (const op of ["consume", "peek"] as const) {
      const answer = await Promise.resolve(b[op]("a", 4, T0)).then(
        (d) => d,
        (e: unknown) => e,
      );
      expect(answer, op).toEqual(new RangeError("cost: 4 is more than this policy could ever admit (at most 3)"));
    }
    expect(asked).toEqual([]);
  });
});
