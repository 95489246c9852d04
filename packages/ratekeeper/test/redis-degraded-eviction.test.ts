/**
 * The `"degraded"` policy end to end (RateLimiter, RedisStore, a real redis-server) against a
 * flood of keys during an outage: a key whose local share is used up stays so while 150,000 other
 * keys arrive (more than the 100,000 keys the store's local memory store holds); keys past the
 * ledger's bound are admitted at a share and counted in `stats().unreconciled`; when Redis answers
 * it is charged the key's units, and the local store is back within its bound.
 * degraded-eviction.test.ts has the cases in detail, on the degraded limiter alone.
 *
 * The client fails every call while `ctl.down` (outageClient); the clock is injected.
 */
import { expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { describeRedis } from "../../../test-support/redis.js";
import { RateLimiter } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { outageClient, redisStoreFixture } from "./redis-store-support.js";

const HOUR = 3_600_000;
const T0 = Math.ceil(Date.now() / HOUR) * HOUR;
const OTHERS = 150_000;
/** The ledger's bound, in keys per limiter (degraded.ts). */
const LEDGER_KEYS = 100_000;

describeRedis("degraded: a key's used share through a flood of other keys", () => {
  const fx = redisStoreFixture();

  it("stays used through 150,000 other keys; Redis is charged it after; the pins go", async () => {
    const ctl = { down: true };
    const { client, inFlight } = outageClient(fx.client, ctl);
    const store = new RedisStore({ client, instances: 2, timeoutMs: 1_000 });
    const namespace = `evict-${process.pid}-${Math.random().toString(36).slice(2)}`;
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 10, window: HOUR, store, namespace, clock: () => T0 });
    // Two instances: a share of 5.
    for (let i = 0; i < 5; i++) expect(await limiter.consume("victim")).toMatchObject({ allowed: true, reason: "degraded" });
    expect(await limiter.consume("victim")).toMatchObject({ allowed: false, reason: "degraded" });
    let admitted = 0;
    for (let i = 0; i < OTHERS; i++) if ((await limiter.consume(`other${i}`)).allowed) admitted++;
    expect(admitted).toBe(OTHERS);
    expect(await limiter.consume("victim")).toMatchObject({ allowed: false, reason: "degraded" });
    // The ledger holds the victim and 99,999 others; the rest were admitted unrecorded.
    expect(store.stats().unreconciled).toBe(OTHERS - (LEDGER_KEYS - 1));
    const local = store.localStore();
    expect(local.pinned).toBe(LEDGER_KEYS);
    // Redis answers: the ledger is charged, the pins released.
    ctl.down = false;
    await until(() => local.pinned === 0 && inFlight() === 0, "the ledger charged", 600, 50);
    expect(local.size).toBeLessThanOrEqual(local.maxKeys);
    expect(await limiter.peek("victim")).toMatchObject({ allowed: true, reason: undefined, remaining: 10 - 5 - 1 });
    await store.close();
  }, 60_000);
});
