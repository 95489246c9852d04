/**
 * The `"degraded"` policy's reconciliation when Redis flaps: Redis answers again (the breaker's
 * probe succeeds, so the store starts charging the ledger to Redis) and fails again before the
 * charge is taken. The units go back to the ledger; the key's local state must stay too. The
 * local state was forgotten when the ledger entry was taken, before the charge: while Redis
 * stayed down the key got a fresh local share, one more per flap of Redis.
 *
 * A real redis-server behind a client whose script calls fail on cue (EVALSHA: decisions and
 * charges), while its EVAL (the breaker's probe) answers: exactly the charge fails.
 */
import { Redis } from "ioredis";
import { expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { describeRedis } from "../../../test-support/redis.js";
import { RateLimiter } from "../src/index.js";
import { RedisStore, type RedisClientLike, type RedisErrorContext } from "../src/stores/redis/index.js";
import { redisStoreFixture } from "./redis-store-support.js";

const LIMIT = 4; // with instances: 2, a local share of 2

describeRedis("degraded: a reconciliation that fails keeps the key's local share used", () => {
  const fx = redisStoreFixture();

  /**
   * A store on `io` whose script calls (EVALSHA) follow `plan` one by one ("fail": rejected;
   * "hold": sent only when `release()` is called), then fail while `down` is set; and its reported
   * failures' contexts.
   */
  function setup() {
    const ctl = { down: false, plan: [] as Array<"fail" | "hold">, release: undefined as (() => Promise<unknown>) | undefined };
    const flaky: RedisClientLike = {
      evalsha: (...a: Parameters<Redis["evalsha"]>) => {
        const step = ctl.plan.shift() ?? (ctl.down ? "fail" : "send");
        if (step === "fail") return Promise.reject(new Error("Connection is closed."));
        if (step === "send") return fx.client.evalsha(...a);
        return new Promise((resolve, reject) => {
          ctl.release = () => fx.client.evalsha(...a).then(resolve, reject);
        });
      },
      eval: (...a: Parameters<Redis["eval"]>) => fx.client.eval(...a),
      del: (...keys: string[]) => fx.client.del(...keys),
    };
    const failures: RedisErrorContext[] = [];
    const store = new RedisStore({ client: flaky, instances: 2, timeoutMs: 1_000, onError: (_e, c) => failures.push(c) });
    const namespace = `flap-${process.pid}-${Math.random().toString(36).slice(2)}`;
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: LIMIT, window: "1h", align: "first-request", store, namespace });
    return { ctl, store, limiter, failures };
  }

  it("a failed charge: the key stays denied locally; once Redis takes it, Redis decides, nothing charged twice", async () => {
    const { ctl, store, limiter, failures } = setup();
    ctl.down = true;
    // Three errors in a row: the first two admitted locally (the share), the third opens the breaker and is denied.
    const local = [];
    for (let i = 0; i < 3; i++) local.push(await limiter.consume("k"));
    expect(local.map((d) => [d.allowed, d.reason])).toEqual([
      [true, "degraded"],
      [true, "degraded"],
      [false, "degraded"],
    ]);
    // The probe answers (Redis is back, briefly): the ledger's 2 units are charged, and that call fails.
    await until(() => failures.some((c) => c.op === "reconcile" && c.key === "k"), "a failed charge of k", 100, 20);
    const after = await limiter.consume("k");
    expect([after.allowed, after.reason]).toEqual([false, "degraded"]); // not a fresh share
    // Redis answers for good: it is charged the 2 units admitted locally, once, and decides again.
    ctl.down = false;
    let d = await limiter.peek("k");
    await until(
      async () => {
        d = await limiter.peek("k");
        return d.reason === undefined && d.remaining === LIMIT - 2 - 1; // an admitted peek counts its own unit
      },
      "the ledger charged to Redis",
      100,
      20,
    );
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: undefined, remaining: 1 });
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: undefined, remaining: 0 });
    expect(await limiter.consume("k")).toMatchObject({ allowed: false, reason: "limit" });
    await store.close();
  });

  it("a unit admitted locally while a charge is out: charged once, after it; the local state counts it until then", async () => {
    const { ctl, store, limiter } = setup();
    ctl.down = true;
    // One call fails (the breaker stays closed): one unit of the share of 2, charged about 100 ms later.
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: "degraded" });
    ctl.plan = ["hold", "fail"];
    await until(() => ctl.release !== undefined, "the charge to be sent", 100, 20);
    // While the charge is out, a call fails: the local state, not forgotten, has room for one more unit.
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: "degraded" });
    ctl.down = false;
    await ctl.release?.(); // Redis takes the first unit
    await new Promise((r) => setImmediate(r));
    // The second unit waits in the ledger, and the local state still counts it: the share is used up.
    ctl.plan = ["fail"];
    expect(await limiter.consume("k")).toMatchObject({ allowed: false, reason: "degraded" });
    let d = await limiter.peek("k");
    await until(
      async () => {
        d = await limiter.peek("k");
        return d.reason === undefined && d.remaining === LIMIT - 2 - 1; // both units charged, once each
      },
      "the second unit charged to Redis",
      100,
      20,
    );
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: undefined, remaining: 1 });
    await store.close();
  });
});
