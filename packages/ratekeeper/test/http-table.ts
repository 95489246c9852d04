/**
 * The one behaviour table every HTTP adapter runs (adapter-*.test.ts), through real HTTP on a
 * loopback port 0 and, where the framework offers it, in-process (Hono app.request, fastify.inject).
 * The cases are in http-cases-decisions.ts and http-cases-flow.ts; drivers and helpers in
 * http-support.ts.
 *
 * Time is a manual clock injected into the limiter; the only real waits are the shaping delays
 * themselves (tens of ms, asserted as lower bounds only).
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, it } from "vitest";
import { MemoryStore, type Store } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { DECISION_CASES } from "./http-cases-decisions.js";
import { FLOW_CASES } from "./http-cases-flow.js";
import { newClock, type Ctx, type Driver } from "./http-support.js";

const CASES = [...DECISION_CASES, ...FLOW_CASES];

let caseCounter = 0;

/**
 * Registers one `it` per case for `driver`.
 * @param storeFactory the store each case's limiter uses (memory by default; Redis in the Redis block)
 */
export function behaviourTable(
  driver: Driver,
  storeFactory: () => Store = () => new MemoryStore({ sweepIntervalMs: 0 }),
  label = "memory",
): void {
  for (const c of CASES) {
    if (c.needsSocket && !driver.real) continue;
    if (c.memoryOnly && label !== "memory") continue;
    it(`${driver.name} [${label}]: ${c.name}`, async () => {
      const ctx: Ctx = { clock: newClock(), events: [], errors: [], store: storeFactory, driver, ns: `t${++caseCounter}-${process.pid}` };
      const t = await driver.start(c.options(ctx), c.listen);
      try {
        await c.run(t, ctx);
      } finally {
        await t.close();
      }
    });
  }
}

/**
 * The same table against the Redis store: one throw-away redis-server per test file
 * (test-support/redis.ts), skipped loudly without redis-server, required under CI.
 */
export function redisBehaviourTable(drivers: readonly Driver[]): void {
  describeRedis("with the Redis store", () => {
    let redis: RedisHandle | undefined;
    let client: Redis | undefined;
    beforeAll(async () => {
      redis = await startRedis();
      client = new Redis(redis.port, redis.host, { lazyConnect: false, maxRetriesPerRequest: 1 });
    });
    afterAll(async () => {
      client?.disconnect();
      await redis?.stop();
    });
    // A generous timeout: the machine is shared; a timeout here would turn into a silent fail-open.
    // The cases' clock stands still while Redis expires keys in real time: a key written with a
    // 100 ms TTL could vanish between two requests on a busy machine. A long minimum TTL keeps
    // every key for the run and changes no decision (an expired state equals a fresh one).
    const factory = (): Store => new RedisStore({ client: client as Redis, timeoutMs: 5_000, failure: "closed", minTtlMs: 600_000 });
    for (const d of drivers) behaviourTable(d, factory, "redis");
  });
}
