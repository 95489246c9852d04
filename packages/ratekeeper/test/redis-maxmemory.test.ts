/**
 * Redis out of memory: a redis-server of the test's own with `maxmemory 2mb` and
 * `maxmemory-policy noeviction` (the setting docs/redis.md recommends) refuses writes with "OOM
 * command not allowed". That is an outage like any other: it is reported through `onError`, the
 * breaker opens, the failure policy answers (no decision throws under the default "degraded";
 * "closed" denies), and once Redis has room again it decides again. (With an eviction policy
 * Redis would instead drop counters in silence, each a fresh allowance: see docs/redis.md.)
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { until } from "../../../test-support/process.js";
import { RateLimiter } from "../src/index.js";
import { RedisStore, type BreakerEvent, type RedisFailurePolicy } from "../src/stores/redis/index.js";

describeRedis("Redis out of memory (maxmemory, noeviction)", () => {
  let redis: RedisHandle;
  let client: Redis;
  beforeAll(async () => {
    redis = await startRedis({ args: ["--maxmemory", "2mb", "--maxmemory-policy", "noeviction"] });
    client = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  /** A limiter on its own namespace, with what its store reported. */
  function limiter(failure: RedisFailurePolicy, namespace: string) {
    const errors: string[] = [];
    const breaker: BreakerEvent[] = [];
    const store = new RedisStore({
      client,
      failure,
      onError: (e) => errors.push(e.message),
      onStateChange: (e) => breaker.push(e),
    });
    return { lim: new RateLimiter({ algorithm: "fixed-window", limit: 3, window: "1h", store, namespace }), errors, breaker };
  }

  /**
   * Fills Redis with keys of its own until it refuses a write, then lowers `maxmemory` to half of
   * what it uses. A full Redis is over its limit by only a few hundred bytes, and Redis frees that
   * much of its own accord (a client's query buffer shrunk by its cron), after which it takes
   * writes again: the limiter's 20 new keys then all fitted and no OOM was reported (seen once in
   * CI). Half leaves no such margin; nothing is evicted under noeviction.
   */
  async function fill(): Promise<void> {
    const pad = "x".repeat(1000);
    for (let i = 0; ; i++) {
      try {
        await client.set(`filler:${i}`, pad);
      } catch (e) {
        expect((e as Error).message).toMatch(/OOM/);
        break;
      }
    }
    const used = Number(/used_memory:(\d+)/.exec(await client.info("memory"))?.[1]);
    expect(used).toBeGreaterThan(0);
    await client.config("SET", "maxmemory", String(Math.floor(used / 2)));
  }

  it("is an outage: reported, breaker open, the failure policy answers; with room again Redis decides", async () => {
    const degraded = limiter("degraded", "oom-degraded");
    const closed = limiter("closed", "oom-closed");
    // Before: Redis decides (the third of 3 admitted, the fourth denied).
    for (let i = 0; i < 3; i++) expect((await degraded.lim.consume("before")).allowed).toBe(true);
    expect((await degraded.lim.consume("before")).allowed).toBe(false);

    await fill();
    // No decision throws under "degraded": new keys are admitted locally, at this instance's share.
    for (let i = 0; i < 20; i++) expect((await degraded.lim.consume(`new:${i}`)).allowed).toBe(true);
    expect(degraded.errors.some((m) => /OOM command not allowed/.test(m))).toBe(true);
    expect(degraded.breaker.some((e) => e.to === "open")).toBe(true);
    // "closed" denies while Redis refuses writes.
    await closed.lim.consume("c").catch(() => undefined);
    await until(async () => !(await closed.lim.consume("c")).allowed, "closed to deny once the breaker knows", 100, 50);
    expect(closed.errors.some((m) => /OOM/.test(m))).toBe(true);

    // Room again: Redis decides again (the breaker's probe closes it), and its counts were kept.
    await client.config("SET", "maxmemory", "0");
    await until(
      async () => {
        await degraded.lim.consume("probe");
        return degraded.breaker.at(-1)?.to === "closed";
      },
      "the breaker to close once Redis has room",
      200,
      50,
    );
    expect(await client.exists(...(await client.keys("rk:{oom-degraded:before}*")))).toBeGreaterThan(0);
    expect((await degraded.lim.peek("before")).remaining).toBe(0);
  }, 60_000);
});
