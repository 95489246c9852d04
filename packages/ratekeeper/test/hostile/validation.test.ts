/**
 * Bad input to the library's constructors and calls: a clear error naming the field and what to
 * do, never a silent pass. And keys that are not well-formed UTF-16 (a lone surrogate, which a
 * JSON "\ud800" escape produces) are handled the same by the memory and the Redis store:
 * Redis clients encode keys as UTF-8, where every lone surrogate becomes U+FFFD, so "a\ud800",
 * "a\udfff" and "a\ufffd" would be one key in Redis and three in memory.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../../test-support/redis.js";
import { MemoryStore, RateLimitConfigError, RateLimiter, type Store } from "../../src/index.js";
import { RedisStore } from "../../src/stores/redis/index.js";

function configError(f: () => unknown): RateLimitConfigError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(RateLimitConfigError);
    return e as RateLimitConfigError;
  }
  throw new Error("expected a RateLimitConfigError, got none");
}

describe("constructors refuse what they do not know, naming it", () => {
  it("MemoryStore: an unknown option (a typo of maxKeys) is refused, with the known ones", () => {
    const e = configError(() => new MemoryStore({ maxkeys: 10 } as never));
    expect(e.message).toMatch(/maxkeys: unknown option/);
    expect(e.message).toMatch(/maxKeys/);
  });

  it("RedisStore: an unknown option (timeoutMS for timeoutMs) is refused, with the known ones", () => {
    const client = new Redis({ lazyConnect: true });
    try {
      const e = configError(() => new RedisStore({ client, timeoutMS: 5 } as never));
      expect(e.message).toMatch(/timeoutMS: unknown option/);
      expect(e.message).toMatch(/timeoutMs/);
    } finally {
      client.disconnect();
    }
  });

  it("RateLimiter: unknown options, and capacity on a fixed window, are named", () => {
    expect(configError(() => new RateLimiter({ algorithm: "gcra", limit: 1, window: 1000, bogus: 1 } as never)).message).toMatch(
      /bogus: unknown option/,
    );
    expect(
      configError(() => new RateLimiter({ algorithm: "fixed-window", limit: 5, window: 1000, capacity: 10 } as never)).message,
    ).toMatch(/capacity: unknown option for "fixed-window"/);
  });
});

/** The keys that collide in Redis's UTF-8: two lone surrogates and U+FFFD itself. */
const LONE = ["a\ud800", "a\udfff", "\udc00b"];

async function keysBehave(store: Store): Promise<void> {
  const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 5, window: "1h", store });
  for (const key of LONE) {
    await expect(limiter.consume(key)).rejects.toThrow(RangeError);
    await expect(limiter.consume(key)).rejects.toThrow(/key: .*lone surrogate.*toWellFormed/);
    await expect(limiter.peek(key)).rejects.toThrow(/lone surrogate/);
  }
  // Well-formed keys, astral characters and U+FFFD included, are taken and stay distinct.
  expect((await limiter.consume("a\ufffd")).remaining).toBe(4);
  expect((await limiter.consume("a\u{1F600}")).remaining).toBe(4);
  expect((await limiter.consume("a\u{1F600}")).remaining).toBe(3);
}

describe("keys with lone surrogates: refused alike by both stores", () => {
  it("memory store", async () => {
    await keysBehave(new MemoryStore({ sweepIntervalMs: 0 }));
  });
});

describeRedis("keys with lone surrogates: refused alike by both stores (Redis)", () => {
  let redis: RedisHandle;
  let client: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });
  it("redis store", async () => {
    // A slow answer on a busy machine must fail the test loudly, not be decided by the failure policy.
    await keysBehave(new RedisStore({ client, failure: "throw", timeoutMs: 10_000 }));
  });
});
