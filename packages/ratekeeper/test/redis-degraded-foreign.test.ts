/**
 * The `"degraded"` policy and a key holding a value the store did not write (another program's
 * list, a text in no layout of ours). Its decisions get the failure policy: this process admits
 * at its share and records the units, to charge them to Redis (charge.ts). Redis refuses that
 * charge as it refused the decision, and will until someone deletes the key. The charge was
 * retried as if Redis had failed (the units back in the ledger, another try in 100 ms): every
 * 100 ms, forever, each time an EVALSHA and an `onError`; and the ledger never emptied, so the
 * limiter never took a new instance count (degraded.ts: only once nothing waits to be charged).
 * Now such a charge is given up as one Redis had no room for: reported once, the key's local
 * state kept (pinned) until it expires, so its share stays used.
 */
import { Redis } from "ioredis";
import { expect, it } from "vitest";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { RateLimiter, type LimitSpec } from "../src/index.js";
import { RedisStore, type RedisErrorContext } from "../src/stores/redis/index.js";

const FOREIGN: Record<string, (c: Redis, key: string) => Promise<unknown>> = {
  "a list": (c, key) => c.rpush(key, "x"),
  "a text": (c, key) => c.set(key, "hello world, not ours"),
};

const CASES: Record<string, LimitSpec[]> = {
  "a fixed window": [{ algorithm: "fixed-window", limit: 3, window: "1h" }],
  "a sliding log": [{ algorithm: "sliding-log", limit: 3, window: "1h" }],
  // Charged limit by limit (charge.ts chargeOne): the second one's key is the foreign one.
  "two limits": [
    { algorithm: "fixed-window", limit: 10, window: "1h" },
    { algorithm: "sliding-window", limit: 3, window: "1h" },
  ],
};

describeRedis("degraded: a charge refused for a foreign value is not retried forever", () => {
  const fx = redisStoreFixture();

  for (const [what, limits] of Object.entries(CASES)) {
    for (const [foreign, put] of Object.entries(FOREIGN)) {
      it(`${what}, ${foreign}: one report of the charge, the share stays used, Redis decides once the key is deleted`, async () => {
        const client = new Redis(fx.redis.port, fx.redis.host);
        const reports: Array<[RedisErrorContext, string]> = [];
        const store = new RedisStore({ client, instances: 1, onError: (e, c) => reports.push([c, e.message]) });
        try {
          const namespace = `df-${Math.random().toString(36).slice(2)}`;
          const limiter = new RateLimiter({ limits, store, namespace });
          await limiter.consume("good");
          const good = (await fx.admin.keys(`*${namespace}*`)).sort();
          const bad = (good.at(-1) as string).replace(":good}", ":bad}");
          await put(fx.admin, bad);
          for (let i = 0; i < 3; i++) expect(await limiter.consume("bad")).toMatchObject({ allowed: true, reason: "degraded" });
          // Five reconciliation periods and more.
          await new Promise((r) => setTimeout(r, 800));
          const charges = reports.filter(([c]) => c.op === "reconcile");
          expect(charges.length, charges.map(([, m]) => m).join("\n")).toBeGreaterThanOrEqual(1);
          expect(charges.length, charges.map(([, m]) => m).join("\n")).toBeLessThanOrEqual(3);
          expect(charges[0]?.[1]).toContain(bad);
          // The local state still counts the 3 units: no fresh share.
          expect(await limiter.consume("bad")).toMatchObject({ allowed: false, reason: "degraded" });
          // Nothing waits to be charged any more.
          expect((store as unknown as { ledgers: Set<unknown> }).ledgers.size).toBe(0);
          await fx.admin.del(bad);
          expect(await limiter.consume("bad")).toMatchObject({ allowed: true, reason: undefined });
          expect(await limiter.consume("good")).toMatchObject({ allowed: true, reason: undefined });
        } finally {
          await store.close();
          client.disconnect();
        }
      });
    }
  }
});
