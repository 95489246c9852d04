/**
 * A foreign value under one key, decided in the same script call as other keys (the store's
 * batching: decisions that wait while two calls are in flight go in one call, the fast path's
 * "B" or the general path). Before the fix the script stopped at the foreign key's error, so every
 * other decision of that call got the failure policy too, and the ones the script had decided
 * before it were charged in Redis as well (charged but answered "store-error"). Now each decision
 * of a batch is decided on its own: the others exactly as a memory store decides them, the
 * foreign key's by the failure policy with an error naming the key, nothing written to it (and,
 * with several limits, none of its limits charged), the breaker closed. Every algorithm, both
 * clients, batched and `batch: false`. (redis-foreign-value.test.ts: one decision at a time.)
 */
import { Redis } from "ioredis";
import { createClient } from "redis";
import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { describeRedis } from "../../../test-support/redis.js";
import { redisStoreFixture } from "./redis-store-support.js";
import { MemoryStore, RateLimiter, type AlgorithmName, type Decision, type LimitSpec } from "../src/index.js";
import { RedisStore, type BreakerEvent, type RedisClientLike } from "../src/stores/redis/index.js";

const ALGORITHMS: AlgorithmName[] = ["fixed-window", "sliding-window", "sliding-log", "token-bucket", "leaky-bucket", "gcra"];
/** Foreign values: a type the store never writes (WRONGTYPE), and strings in no layout of ours. */
const FOREIGN: Record<string, { put: (c: Redis, key: string) => Promise<unknown>; read: (c: Redis, key: string) => Promise<unknown> }> = {
  "a list": { put: (c, key) => c.rpush(key, "x"), read: (c, key) => c.lrange(key, 0, -1) },
  "a text": { put: (c, key) => c.set(key, "hello world, not ours"), read: (c, key) => c.get(key) },
  // Another program's counter: a decimal, as a clock-aligned fixed window's value is (but below
  // any value of ours, whose window tag starts at 1 x 2^39); INCRBY would have taken it as ours.
  "a decimal": { put: (c, key) => c.set(key, "12"), read: (c, key) => c.get(key) },
  // 24 + 8 bytes: a sliding log's length; its header (three doubles) is no log's.
  "a text of 32 bytes": { put: (c, key) => c.set(key, "hello world, not ours, 32 bytes."), read: (c, key) => c.get(key) },
};
/** The order decisions are fired in, all at once: the foreign key among the others, so batches hold both. */
const ORDER = ["o0", "o1", "o2", "bad", "o3", "o4", "o0", "bad", "o1", "o2", "o3", "bad", "o4", "o0", "o1", "bad", "o2", "o3", "o4"];

/** `limits` per case: one limit of the algorithm, or two where the second (the algorithm) holds the foreign value. */
function specsOf(algorithm: AlgorithmName, multi: boolean): LimitSpec[] {
  const own: LimitSpec = { algorithm, limit: 3, window: "1h" };
  return multi ? [{ algorithm: "fixed-window", limit: 4, window: "1h" }, own] : [own];
}

it("the script's lists of errors that are never about a key are client.ts's (isKeyValueError)", () => {
  const read = (f: string) => readFileSync(new URL(`../src/stores/redis/${f}`, import.meta.url), "utf8");
  const lua = read("scripts/ratekeeper.lua");
  const ts = read("client.ts");
  const luaList = (name: string) =>
    [...(new RegExp(`local ${name} = \\{([^}]*)\\}`).exec(lua)?.[1] ?? "").matchAll(/"([^"]*)"/g)].map((m) => m[1]);
  expect(luaList("CANNOT_SERVE")).toEqual(/const CANNOT_SERVE =\s*\/\\b\(([^)]*)\)/.exec(ts)?.[1]?.split("|"));
  expect(luaList("SCRIPT_REFUSED")).toEqual(/const SCRIPT_REFUSED = \/([^/]*)\//.exec(ts)?.[1]?.split("|"));
});

describeRedis("a foreign value under one key, in a batch with other keys", () => {
  const fx = redisStoreFixture();

  it("a namespace set by hand, shared by a sliding window of other buckets: the error says so (not only 'delete the key')", async () => {
    const client = new Redis(fx.redis.port, fx.redis.host);
    try {
      const errors: Error[] = [];
      const store = new RedisStore({ client, failure: "closed", onError: (e) => errors.push(e) });
      const mk = (buckets: number) =>
        new RateLimiter({ algorithm: "sliding-window", buckets, limit: 10, window: "1h", namespace: "by-hand", store });
      await mk(10).consume("k");
      const d = await mk(5).consume("k");
      expect(d.reason).toBe("store-error");
      expect(errors).toHaveLength(1);
      expect(errors[0]?.message).toMatch(/namespace was set by hand.*buckets/);
    } finally {
      client.disconnect();
    }
  });

  it("a reset whose epoch key holds a foreign value: reported, and nothing reset (not the state without the epoch)", async () => {
    const client = new Redis(fx.redis.port, fx.redis.host);
    try {
      // (A decimal is an epoch's own layout: not foreign there.)
      for (const [what, foreign] of Object.entries(FOREIGN).filter(([w]) => w !== "a decimal")) {
        const errors: Error[] = [];
        const store = new RedisStore({ client, failure: "closed", onError: (e) => errors.push(e) });
        const lim = new RateLimiter({ algorithm: "fixed-window", limit: 3, window: "1h", store, namespace: `reset-${what}` });
        await lim.consume("k");
        const [stateKey] = await fx.admin.keys(`*{reset-${what}:k}`);
        const epochKey = `${stateKey as string}:e`;
        await foreign.put(fx.admin, epochKey);
        const state = await fx.admin.getBuffer(stateKey as string);
        await lim.reset("k");
        expect(await fx.admin.getBuffer(stateKey as string), what).toEqual(state);
        expect(
          errors.map((e) => e.message.includes(epochKey)),
          what,
        ).toEqual([true]);
        expect(await lim.consume("k").then((d) => d.remaining), what).toBe(1); // still counted
      }
    } finally {
      client.disconnect();
    }
  });

  it("a refund of two limits whose sliding log reads as a state but fails on its slots (a namespace shared by hand with a log of another limit): applied whole or not at all", async () => {
    const client = new Redis(fx.redis.port, fx.redis.host);
    try {
      const errors: Error[] = [];
      const store = new RedisStore({ client, failure: "closed", onError: (e) => errors.push(e) });
      let now = 1_764_300_000_000;
      const clock = () => now;
      const mk = (log: number) =>
        new RateLimiter({
          limits: [
            { algorithm: "fixed-window", limit: 100, window: "1h" },
            { algorithm: "sliding-log", limit: log, window: "1h" },
          ],
          namespace: "shared-by-hand",
          store,
          clock,
        });
      // A log of 10 slots (104 bytes) that has logged 150 units: its header is a sane one.
      const ten = mk(10);
      for (let i = 0; i < 15; i++) {
        expect((await ten.consume("k", 10)).allowed).toBe(true);
        now += 3_600_001;
      }
      expect((await ten.consume("k", 3)).allowed).toBe(true);
      const keys = (await fx.admin.keys("*{shared-by-hand:k}*")).sort();
      expect(keys).toHaveLength(2);
      const before = await Promise.all(keys.map((k) => fx.admin.getBuffer(k)));
      // The same namespace, a log of 100: its refund reads slot 152 mod 100 of a 10-slot string.
      await mk(100).refund("k", 1);
      const after = await Promise.all(keys.map((k) => fx.admin.getBuffer(k)));
      expect(errors.map((e) => e.message.includes(keys[1] as string))).toEqual([true]);
      expect(after).toEqual(before); // the fixed window's unit not given back alone
    } finally {
      client.disconnect();
    }
  });

  for (const clientKind of ["ioredis", "node-redis"] as const) {
    for (const batch of [true, false]) {
      for (const multi of [false, true]) {
        const title = `${clientKind}, ${batch ? "batched" : "batch: false"}, ${multi ? "two limits, the second foreign" : "one limit"}`;
        it(`${title}: the others decided exactly, the foreign key by the policy and never written`, async () => {
          let n = 0;
          const node = clientKind === "node-redis" ? createClient({ socket: { host: fx.redis.host, port: fx.redis.port } }) : undefined;
          await node?.connect();
          const ioredis = clientKind === "ioredis" ? new Redis(fx.redis.port, fx.redis.host) : undefined;
          try {
            for (const algorithm of ALGORITHMS) {
              for (const [what, foreign] of Object.entries(FOREIGN)) {
                const label = `${algorithm}, ${what}`;
                const errors: Error[] = [];
                const breaker: BreakerEvent[] = [];
                const store = new RedisStore({
                  client: (node ?? ioredis) as RedisClientLike,
                  failure: "closed",
                  batch,
                  onError: (e) => errors.push(e),
                  onStateChange: (e) => breaker.push(e),
                });
                const namespace = `fb-${clientKind}-${batch}-${multi}-${++n}`;
                const limits = specsOf(algorithm, multi);
                const lim = new RateLimiter({ limits, store, namespace });
                await lim.consume("probe");
                const probeKeys = (await fx.admin.keys(`*{${namespace}:probe}*`)).sort();
                expect(probeKeys, label).toHaveLength(limits.length);
                const badKeys = probeKeys.map((k) => k.replace(":probe}", ":bad}"));
                const foreignKey = badKeys[badKeys.length - 1] as string;
                await foreign.put(fx.admin, foreignKey);
                const before = await foreign.read(fx.admin, foreignKey);

                const reference = new RateLimiter({ limits, store: new MemoryStore() });
                const expected = new Map<string, boolean[]>();
                for (let round = 0; round < 3; round++) {
                  for (const key of ORDER)
                    if (key !== "bad") expected.set(key, [...(expected.get(key) ?? []), (await reference.consume(key)).allowed]);
                }

                const got = new Map<string, Decision[]>();
                for (let round = 0; round < 3; round++) {
                  // All at once: the first two go out alone, the rest wait and go in batches.
                  const ds = await Promise.all(ORDER.map((key) => lim.consume(key)));
                  ORDER.forEach((key, i) => got.set(key, [...(got.get(key) ?? []), ds[i] as Decision]));
                }
                for (const [key, want] of expected) {
                  const ds = got.get(key) as Decision[];
                  expect(
                    ds.map((d) => d.allowed),
                    `${label}, ${key}: ${errors[0]?.message ?? ""}`,
                  ).toEqual(want);
                  expect(
                    ds.filter((d) => d.reason === "store-error"),
                    `${label}, ${key}`,
                  ).toEqual([]);
                }
                const bad = got.get("bad") as Decision[];
                expect(
                  bad.map((d) => [d.allowed, d.reason]),
                  label,
                ).toEqual(bad.map(() => [false, "store-error"]));
                // Reported, each naming the key and what to do.
                expect(errors, label).toHaveLength(bad.length);
                for (const e of errors) {
                  expect(e.message, label).toContain(foreignKey);
                  expect(e.message, label).toMatch(/delete/);
                }
                // Nothing written: the foreign value as it was, and no other limit of the key charged.
                expect(await foreign.read(fx.admin, foreignKey), label).toEqual(before);
                for (const k of badKeys.slice(0, -1)) expect(await fx.admin.exists(k), `${label}: ${k}`).toBe(0);
                expect(
                  breaker.map((e) => e.to),
                  label,
                ).toEqual([]);
              }
            }
          } finally {
            ioredis?.disconnect();
            await node?.quit();
          }
        }, 120_000);
      }
    }
  }
});
