/**
 * A foreign value (another program's list or hash, a string in no layout of ours, a small
 * decimal) under a key of quota leasing (scripts/lease.lua: the state, its lessees `:L`, its
 * reset epoch `:e`) or of a concurrency limit (scripts/concurrency.lua: the leases `:c`, the
 * tombstones `:c:r`). As for ratekeeper.lua (redis-foreign-value.test.ts,
 * redis-foreign-batch.test.ts): the value is never read as ours nor overwritten; that key's call
 * gets the failure policy and `onError` with an error naming the Redis key and what to do; every
 * other key is decided exactly; the breaker stays closed; and the policy's hand-over to Redis
 * (the lease ledger) does not retry such a key on a timer (onError every 100 ms, for ever).
 * Before: a decimal under a leased clock-aligned fixed window read as a window that is over (the
 * key admitted and overwritten), a text of another length under a leased bucket read as garbage
 * (denied, no onError), and a concurrency key's WRONGTYPE named no Redis key.
 */
import { Redis } from "ioredis";
import { createClient } from "redis";
import { expect, it } from "vitest";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { ConcurrencyLimiter, MemoryStore, RateLimiter, type LimitSpec } from "../src/index.js";
import { RedisStore, type BreakerEvent, type RedisClientLike } from "../src/stores/redis/index.js";

type Put = (c: Redis, key: string) => Promise<unknown>;
type Read = (c: Redis, key: string) => Promise<unknown>;
const FOREIGN: Record<string, { put: Put; read: Read }> = {
  "a list": { put: (c, key) => c.rpush(key, "x"), read: (c, key) => c.lrange(key, 0, -1) },
  "a hash": { put: (c, key) => c.hset(key, "f", "v"), read: (c, key) => c.hgetall(key) },
  "a text": { put: (c, key) => c.set(key, "hello world, not ours"), read: (c, key) => c.get(key) },
  "a decimal": { put: (c, key) => c.set(key, "12"), read: (c, key) => c.get(key) },
  "a text of 32 bytes": { put: (c, key) => c.set(key, "hello world, not ours, 32 bytes."), read: (c, key) => c.get(key) },
};
const LEASED: Record<string, LimitSpec> = {
  "fixed window (counter layout)": { algorithm: "fixed-window", limit: 3, window: "1h" },
  "fixed window from the first request": { algorithm: "fixed-window", limit: 3, window: "1h", align: "first-request" },
  "token bucket": { algorithm: "token-bucket", limit: 3, window: "1h" },
  gcra: { algorithm: "gcra", limit: 3, window: "1h" },
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeRedis("a foreign value under a key of quota leasing or of a concurrency limit", () => {
  const fx = redisStoreFixture();

  let n = 0;
  for (const clientKind of ["ioredis", "node-redis"] as const) {
    const connect = async (): Promise<{ client: RedisClientLike; close: () => Promise<unknown> }> => {
      if (clientKind === "ioredis") {
        const c = new Redis(fx.redis.port, fx.redis.host);
        return { client: c, close: async () => c.disconnect() };
      }
      const c = createClient({ socket: { host: fx.redis.host, port: fx.redis.port } });
      await c.connect();
      return { client: c as RedisClientLike, close: () => c.quit() };
    };

    it(`${clientKind}: quota leasing, the state key: the policy and onError, the value kept, the others exact`, async () => {
      const { client, close } = await connect();
      try {
        for (const [alg, spec] of Object.entries(LEASED)) {
          for (const [what, foreign] of Object.entries(FOREIGN)) {
            const label = `${alg}, ${what}`;
            const errors: Error[] = [];
            const breaker: BreakerEvent[] = [];
            const store = new RedisStore({
              client,
              failure: "closed",
              onError: (e) => errors.push(e),
              onStateChange: (e) => breaker.push(e),
            });
            const namespace = `fl-${clientKind}-${++n}`;
            const lim = new RateLimiter({ ...spec, store, namespace, lease: true });
            await lim.consume("probe");
            const stateKey = `rk:{${namespace}:bad}`;
            expect(await fx.admin.exists(`rk:{${namespace}:probe}`), label).toBe(1);
            await foreign.put(fx.admin, stateKey);
            const before = await foreign.read(fx.admin, stateKey);
            const bad = [];
            for (let i = 0; i < 4; i++) bad.push(await lim.consume("bad"));
            expect(
              bad.map((d) => [d.allowed, d.reason]),
              label,
            ).toEqual(bad.map(() => [false, "store-error"]));
            expect(await foreign.read(fx.admin, stateKey), label).toEqual(before);
            expect(errors.length, label).toBeGreaterThan(0);
            for (const e of errors) expect(e.message, label).toMatch(new RegExp(`\\{${namespace}:bad\\}.*delete`));
            const reference = new RateLimiter({ ...spec, store: new MemoryStore() });
            for (let i = 0; i < 5; i++) {
              expect((await lim.consume("other")).allowed, `${label}, other #${i}`).toBe((await reference.consume("other")).allowed);
            }
            expect(
              breaker.map((e) => e.to),
              label,
            ).toEqual([]);
          }
        }
      } finally {
        await close();
      }
    }, 120_000);

    it(`${clientKind}: quota leasing, the lessees or epoch key: decided exactly, reported, the value kept`, async () => {
      const { client, close } = await connect();
      try {
        for (const suffix of [":L", ":e"]) {
          for (const [what, foreign] of Object.entries(FOREIGN)) {
            if (suffix === ":e" && what === "a decimal") continue; // an epoch's own layout
            const label = `${suffix}, ${what}`;
            const errors: Error[] = [];
            const breaker: BreakerEvent[] = [];
            const store = new RedisStore({
              client,
              failure: "closed",
              onError: (e) => errors.push(e),
              onStateChange: (e) => breaker.push(e),
            });
            const namespace = `fk-${clientKind}-${++n}`;
            const spec = LEASED["token bucket"] as LimitSpec;
            const lim = new RateLimiter({ ...spec, store, namespace, lease: true });
            const key = `rk:{${namespace}:bad}${suffix}`;
            await foreign.put(fx.admin, key);
            const before = await foreign.read(fx.admin, key);
            const reference = new RateLimiter({ ...spec, store: new MemoryStore() });
            for (let i = 0; i < 5; i++) {
              expect((await lim.consume("bad")).allowed, `${label} #${i}`).toBe((await reference.consume("bad")).allowed);
            }
            expect(await foreign.read(fx.admin, key), label).toEqual(before);
            expect(errors.length, label).toBeGreaterThan(0);
            for (const e of errors) expect(e.message, label).toContain(`${key}: `);
            expect(
              breaker.map((e) => e.to),
              label,
            ).toEqual([]);
          }
        }
      } finally {
        await close();
      }
    }, 120_000);

    it(`${clientKind}: a concurrency limit's leases key: the policy and onError naming the key, the others exact, no retry storm`, async () => {
      const { client, close } = await connect();
      try {
        for (const failure of ["closed", "open", "degraded"] as const) {
          for (const [what, foreign] of Object.entries(FOREIGN)) {
            const label = `${failure}, ${what}`;
            const errors: Error[] = [];
            const breaker: BreakerEvent[] = [];
            const store = new RedisStore({ client, failure, onError: (e) => errors.push(e), onStateChange: (e) => breaker.push(e) });
            const namespace = `fc-${clientKind}-${++n}`;
            const pool = new ConcurrencyLimiter({ limit: 2, leaseMs: 60_000, store, namespace });
            const key = `rk:{${namespace}:bad}:c`;
            await foreign.put(fx.admin, key);
            const before = await foreign.read(fx.admin, key);
            const a = await pool.acquire("bad");
            expect(a.reason, label).toBe(failure === "degraded" ? "degraded" : "store-error");
            await a.renew();
            await a.release();
            expect(errors.length, label).toBeGreaterThan(0);
            for (const e of errors) expect(e.message, label).toMatch(new RegExp(`${key.replace(/[{}]/g, "\\$&")}.*delete`));
            // The ledger's hand-over does not retry the key on a timer: onError stops.
            await sleep(350);
            const settled = errors.length;
            await sleep(500);
            expect(errors.length, `${label}: ${errors.at(-1)?.message ?? ""}`).toBe(settled);
            expect(await foreign.read(fx.admin, key), label).toEqual(before);
            const others = [];
            for (let i = 0; i < 3; i++) others.push((await pool.acquire("other")).acquired);
            expect(others, label).toEqual([true, true, false]);
            expect(
              breaker.map((e) => e.to),
              label,
            ).toEqual([]);
          }
        }
      } finally {
        await close();
      }
    }, 120_000);

    if (clientKind === "ioredis") {
      it("a lease the policy granted locally, its key holding a foreign value by the hand-over: kept local, reported, not retried", async () => {
        const c = new Redis(fx.redis.port, fx.redis.host);
        let failNext = 1;
        // The first call on the key fails as a lost connection would (the breaker stays closed: one
        // error), the rest go to Redis; without `pipeline` the shim sends each call by `evalsha`.
        const client = new Proxy(c, {
          get(t, p) {
            if (p === "pipeline") return undefined;
            if (p === "evalsha") {
              return (...a: unknown[]) => {
                if (failNext > 0 && a.some((x) => typeof x === "string" && x.endsWith(":bad}:c"))) {
                  failNext--;
                  return Promise.reject(new Error("read ECONNRESET"));
                }
                return (t.evalsha as (...b: unknown[]) => Promise<unknown>)(...a);
              };
            }
            const v = Reflect.get(t, p) as unknown;
            return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(t) : v;
          },
        });
        try {
          const errors: Error[] = [];
          const store = new RedisStore({ client, failure: "degraded", onError: (e) => errors.push(e) });
          const namespace = `fh-${++n}`;
          const pool = new ConcurrencyLimiter({ limit: 2, leaseMs: 60_000, store, namespace });
          const a = await pool.acquire("bad");
          expect([a.acquired, a.reason]).toEqual([true, "degraded"]);
          const key = `rk:{${namespace}:bad}:c`;
          await fx.admin.rpush(key, "x"); // before the hand-over (100 ms after the failed call)
          await sleep(350);
          expect(errors.map((e) => e.message.includes(key) && /delete/.test(e.message))).toEqual([false, true]);
          expect(await a.renew()).toBe(true); // its local table's
          await sleep(500);
          expect(errors).toHaveLength(2);
          await a.release();
          await sleep(350);
          const settled = errors.length;
          await sleep(500);
          expect(errors).toHaveLength(settled);
          expect(await fx.admin.lrange(key, 0, -1)).toEqual(["x"]);
        } finally {
          c.disconnect();
        }
      });
    }

    it(`${clientKind}: a concurrency limit's tombstones key: a release there is reported naming it, once`, async () => {
      const { client, close } = await connect();
      try {
        for (const [what, foreign] of Object.entries(FOREIGN)) {
          const errors: Error[] = [];
          const store = new RedisStore({ client, failure: "closed", onError: (e) => errors.push(e) });
          const namespace = `ft-${clientKind}-${++n}`;
          const leases = store.bindLeases(2, namespace);
          const key = `rk:{${namespace}:bad}:c:r`;
          await foreign.put(fx.admin, key);
          const before = await foreign.read(fx.admin, key);
          // A release of an id Redis does not hold: a tombstone is due there.
          const r = await leases.release("bad", "not-held", undefined, 60_000);
          expect(r.reason, what).toBe("store-error");
          await sleep(850);
          expect(
            errors.map((e) => e.message.includes(`${key}`) && /delete/.test(e.message)),
            what,
          ).toEqual([true]);
          expect(await foreign.read(fx.admin, key), what).toEqual(before);
        }
      } finally {
        await close();
      }
    }, 120_000);
  }
});
