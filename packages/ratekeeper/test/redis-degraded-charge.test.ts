/**
 * The `"degraded"` policy's charge to Redis for a limiter of several limits (10 a second and
 * 100 an hour on one key, say). While Redis is down the key is limited locally on every limit;
 * an outage that spans several of the short limit's windows admits more units than that limit's
 * capacity, all of them inside the long limit's window. The charge took at most the smallest
 * capacity of the limits, in one all-or-nothing consume of every limit: the long limit was
 * charged only the short one's capacity, and the rest of its units were lost (the key got them
 * again after the outage: looser than the limit in that window).
 *
 * A real redis-server behind a client whose calls fail while `down` is set (decisions, charges
 * and the breaker's probe alike), on an injected clock: the outage's windows are chosen, not timed.
 */
import { Redis } from "ioredis";
import { expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { describeRedis } from "../../../test-support/redis.js";
import { RateLimiter, type Decision, type LimitSpec } from "../src/index.js";
import { RedisStore, type RedisClientLike, type RedisErrorContext } from "../src/stores/redis/index.js";
import { redisStoreFixture } from "./redis-store-support.js";

const SECOND = 1_000;
const HOUR = 3_600_000;
/** An hour's boundary (the injected clock starts there): the limits' windows are aligned to it. */
const T0 = Math.ceil(Date.now() / HOUR) * HOUR;

describeRedis("degraded: the charge of a limiter of several limits", () => {
  const fx = redisStoreFixture();

  /**
   * A store whose every call (script, probe) fails while `ctl.down`, one instance, degraded;
   * `ctl.replies` counts the script calls answered; `ctl.plan` fails or holds the next ones. The
   * limiter's clock is `clock.now` when `injected`.
   */
  function setup(limits: LimitSpec[], injected = true, timeoutMs = 1_000, instances = 1) {
    const ctl = {
      down: false,
      replies: 0,
      /** The next script calls, one by one: failed, or held until `release()` / `reject()`. */
      plan: [] as Array<"fail" | "hold">,
      release: undefined as (() => Promise<unknown>) | undefined,
      reject: undefined as (() => void) | undefined,
    };
    const fail = () => Promise.reject(new Error("Connection is closed."));
    const held = (...a: Parameters<Redis["evalsha"]>) =>
      new Promise((resolve, reject) => {
        ctl.release = () => fx.client.evalsha(...a).then(resolve, reject);
        ctl.reject = () => reject(new Error("Connection is closed."));
      });
    const flaky: RedisClientLike = {
      evalsha: (...a: Parameters<Redis["evalsha"]>) => {
        const step = ctl.plan.shift() ?? (ctl.down ? "fail" : undefined);
        if (step === "fail") return fail();
        if (step === "hold") return held(...a);
        return fx.client.evalsha(...a).finally(() => ctl.replies++);
      },
      eval: (...a: Parameters<Redis["eval"]>) => (ctl.down ? fail() : fx.client.eval(...a)),
      del: (...keys: string[]) => fx.client.del(...keys),
    };
    const failures: RedisErrorContext[] = [];
    const store = new RedisStore({ client: flaky, instances, timeoutMs, onError: (_e, c) => failures.push(c) });
    const clock = { now: T0 };
    const namespace = `charge-${process.pid}-${Math.random().toString(36).slice(2)}`;
    const limiter = new RateLimiter({ limits, store, namespace, ...(injected ? { clock: () => clock.now } : {}) });
    return { ctl, store, clock, limiter, failures };
  }

  /** Consumes at `at` until the first denial (at most 100): the units admitted, and that denial. */
  async function admitAll(limiter: RateLimiter, clock: { now: number }, at: number): Promise<[number, Decision]> {
    clock.now = at;
    for (let n = 0; n < 100; n++) {
      const d = await limiter.consume("k");
      if (!d.allowed) return [n, d];
    }
    throw new Error("never denied");
  }

  it("every limit is charged all the units admitted locally, not the smallest capacity", async () => {
    const limits: LimitSpec[] = [
      { name: "second", algorithm: "fixed-window", limit: 2, window: SECOND },
      { name: "hour", algorithm: "fixed-window", limit: 10, window: HOUR },
    ];
    const { ctl, store, clock, limiter } = setup(limits);
    ctl.down = true;
    // Five seconds of the outage, two units each: the hour's 10, all admitted locally.
    for (let s = 0; s < 5; s++) expect(await admitAll(limiter, clock, T0 + s * SECOND)).toMatchObject([2, { reason: "degraded" }]);
    const [none, denied] = await admitAll(limiter, clock, T0 + 5 * SECOND);
    expect([none, denied.reason, denied.policyName]).toEqual([0, "degraded", "hour"]);
    // Redis answers again: the probe closes the breaker and the ledger's 10 units are charged.
    ctl.down = false;
    let d = await limiter.peek("k");
    const hourFull = async () => {
      d = await limiter.peek("k");
      return d.reason !== "degraded" && d.limits?.[1]?.allowed === false;
    };
    await until(hourFull, "the hour charged its 10 units", 100, 20);
    // (At T0 + 5 s: a second of its own, where the denied peek leaves the second's 2 untouched.)
    expect(d.limits?.map((l) => [l.name, l.allowed, l.remaining])).toEqual([
      ["second", true, 2],
      ["hour", false, 0],
    ]);
    // The rest of the hour: nothing more for the key (it was given all 10 during the outage).
    for (let s = 5; s < 10; s++) expect(await admitAll(limiter, clock, T0 + s * SECOND)).toMatchObject([0, { reason: "limit" }]);
    await store.close();
  });

  it("a key Redis had no room for keeps its local state: the next outage in the window gives it no fresh share", async () => {
    const { ctl, store, clock, limiter } = setup([{ algorithm: "fixed-window", limit: 4, window: HOUR }]);
    expect(await admitAll(limiter, clock, T0)).toMatchObject([4, { reason: "limit" }]); // Redis decides
    ctl.down = true;
    expect(await admitAll(limiter, clock, T0 + SECOND)).toMatchObject([4, { reason: "degraded" }]); // the local share
    // Redis answers again: the probe closes the breaker, and the charge of the 4 units (the first
    // script call) finds the key full: Redis takes none of them.
    const replies = ctl.replies;
    ctl.down = false;
    await until(() => ctl.replies > replies, "the charge answered", 100, 20);
    await new Promise((r) => setImmediate(r));
    expect(await limiter.consume("k")).toMatchObject({ allowed: false, reason: "limit" });
    // Redis goes again within the hour. Forgotten when the charge was answered, the key's local
    // state started a fresh share: 4 more, and 4 more at each flap of Redis in that hour.
    ctl.down = true;
    expect(await admitAll(limiter, clock, T0 + 2 * SECOND)).toMatchObject([0, { reason: "degraded" }]);
    await store.close();
  });

  it("without a clock of the limiter: each limit is charged at Redis's time", async () => {
    // Windows from the first request, so that none ends between the outage and the charge.
    const limits: LimitSpec[] = [
      { name: "hour", algorithm: "fixed-window", limit: 4, window: HOUR, align: "first-request" },
      { name: "day", algorithm: "fixed-window", limit: 10, window: 24 * HOUR, align: "first-request" },
    ];
    const { ctl, store, clock, limiter } = setup(limits, false);
    ctl.down = true;
    expect(await admitAll(limiter, clock, 0)).toMatchObject([4, { reason: "degraded", policyName: "hour" }]);
    ctl.down = false;
    let d = await limiter.peek("k");
    // The day is charged after the hour. A denied peek reports the day's remaining with its own
    // unit given back: 10 - 4.
    const dayCharged = async () => {
      d = await limiter.peek("k");
      return d.reason !== "degraded" && d.limits?.[1]?.remaining === 6;
    };
    await until(dayCharged, "the day charged its 4 units", 100, 20);
    expect(d.limits?.map((l) => [l.name, l.allowed, l.remaining])).toEqual([
      ["hour", false, 0],
      ["day", true, 6],
    ]);
    await store.close();
  });

  it("a limit's charge that Redis takes after the watchdog gave it up is given back: charged once", async () => {
    const limits: LimitSpec[] = [
      { name: "hour", algorithm: "fixed-window", limit: 10, window: HOUR },
      { name: "second", algorithm: "fixed-window", limit: 2, window: SECOND },
    ];
    const { ctl, store, clock, limiter, failures } = setup(limits, true, 200);
    ctl.down = true;
    expect(await admitAll(limiter, clock, T0)).toMatchObject([2, { reason: "degraded" }]);
    // Redis answers: the hour's charge (the first script call) is held, and with no other call
    // answered the lane's watchdog gives it up (a frozen Redis): the units go back to the ledger.
    ctl.plan = ["hold"];
    ctl.down = false;
    const timedOut = () => failures.some((c) => c.op === "reconcile" && c.timedOut);
    await until(timedOut, "the held charge timed out", 200, 20);
    // The breaker's next probe closes it, and the units are charged again.
    let d = await limiter.peek("k");
    // A denied peek (the second is full) reports the hour with its own unit given back: 10 - 2.
    const chargedOnce = async () => {
      d = await limiter.peek("k");
      return d.reason !== "degraded" && d.limits?.[1]?.allowed === false && d.limits[0]?.remaining === 8;
    };
    await until(chargedOnce, "the units charged again", 100, 20).catch((e) => {
      console.log("DBG", JSON.stringify(d), JSON.stringify(failures), store.state);
      throw e;
    });
    expect(ctl.release).toBeDefined();
    // The held charge reaches Redis now, after its units were charged again: it is refunded.
    await ctl.release?.();
    await until(chargedOnce, "the late charge given back", 100, 20);
    expect(d.limits?.map((l) => [l.name, l.allowed, l.remaining])).toEqual([
      ["hour", true, 8],
      ["second", false, 0],
    ]);
    await store.close();
  });

  it("a charge that fails while a later reconciliation emptied the ledger: its units are charged all the same", async () => {
    // Two instances: a local share of 2 of 4 an hour. One failed call each time, the breaker
    // stays closed: each admission is charged about 100 ms later (a reconciliation of its own).
    const { ctl, store, clock, limiter } = setup([{ algorithm: "fixed-window", limit: 4, window: HOUR }], true, 1_000, 2);
    clock.now = T0;
    ctl.plan = ["fail", "hold"]; // k admitted locally; its charge held
    expect(await limiter.consume("k")).toMatchObject({ allowed: true, reason: "degraded" });
    await until(() => ctl.reject !== undefined, "k's charge sent", 100, 20);
    ctl.plan = ["fail"]; // j admitted locally, charged by a second reconciliation, which empties the ledger
    expect(await limiter.consume("j")).toMatchObject({ allowed: true, reason: "degraded" });
    // An admitted peek reports what would be left after it: 4 - 1 charged - 1.
    const charged = (key: string) => async () => {
      const d = await limiter.peek(key);
      return d.reason === undefined && d.remaining === 2;
    };
    await until(charged("j"), "j charged", 100, 20);
    // k's charge fails now: its unit goes back to the ledger and must be charged again. It was
    // not: the second reconciliation, finding the ledger empty, had dropped the limiter from the
    // store's ledgers while k's charge was out, and no later reconciliation looked at it.
    ctl.reject?.();
    await until(charged("k"), "k charged after its failed charge", 100, 20);
    await store.close();
  });
});
