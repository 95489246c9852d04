/**
 * ConcurrencyLimiter on Redis (stores/redis/leases.ts, scripts/concurrency.lua):
 * - the differential test: the same random acquires, renews, releases and counts through a
 *   MemoryStore and a RedisStore, with the same injected clock, give identical answers;
 * - the key layout: one script call per acquire, a TTL on every key, the hash tag;
 * - many processes on one key, with every core busy: 4 processes x 40 holders looping acquire /
 *   hold / release with limit 10 never hold more than 10 at once, as counted by an independent
 *   tally on another redis-server, and every slot comes back; a process that holds every lease
 *   and is killed with SIGKILL leaves the key full until its leases expire, then free. On one
 *   Redis and on a 3-master cluster.
 */
import fc from "fast-check";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { saturateCpu, type CpuLoad } from "../../../test-support/cpu.js";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { startRedisCluster, type RedisClusterHandle } from "../../../test-support/redis-cluster.js";
import { ConcurrencyLimiter, MemoryStore, type BoundLeases, type LeaseAnswer } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { Holder } from "./fixtures/holders.js";
import { leaseOpsArb } from "./lease-model.js";

const LIMIT = 10;
let seq = 0;
const uniq = (tag: string) => `${tag}${process.pid}-${++seq}`;

describeRedis("ConcurrencyLimiter on Redis", () => {
  let redis: RedisHandle;
  let tally: RedisHandle;
  let cluster: RedisClusterHandle;
  let client: Redis;
  beforeAll(async () => {
    [redis, tally, cluster] = await Promise.all([startRedis(), startRedis(), startRedisCluster(3)]);
    client = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    await Promise.all([redis?.stop(), tally?.stop(), cluster?.stop()]);
  });

  it("answers exactly as the memory store: random acquires, renews, releases and counts on a few keys", async () => {
    // With an injected clock the TTLs are logical: keep keys for the test's real duration.
    const redisStore = new RedisStore({ client, failure: "throw", timeoutMs: 10_000, minTtlMs: 600_000 });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 2 ** 41 }),
        fc.integer({ min: 1, max: 5000 }).chain((leaseMs) => fc.tuple(fc.constant(leaseMs), leaseOpsArb(leaseMs, 40))),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 40, maxLength: 40 }),
        async (limit, t0, [leaseMs, ops], keyOf) => {
          const ns = uniq("d");
          const mem = new MemoryStore({ sweepIntervalMs: 0 }).bindLeases(limit, ns);
          const red = redisStore.bindLeases(limit, ns);
          let t = t0;
          for (const [i, op] of ops.entries()) {
            t += op.dt;
            const key = `k${keyOf[i] ?? 0}`;
            const run = (b: BoundLeases): LeaseAnswer | Promise<LeaseAnswer> =>
              op.kind === "acquire"
                ? b.acquire(key, `L${op.id}`, leaseMs, t)
                : op.kind === "renew"
                  ? b.renew(key, `L${op.id}`, leaseMs, t)
                  : op.kind === "release"
                    ? b.release(key, `L${op.id}`, t)
                    : b.count(key, t);
            expect(await run(red), `${op.kind} at step ${i}`).toEqual(await run(mem));
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it("one script call per acquire; the set has a TTL (its last lease's expiry) and the key's hash tag", async () => {
    const store = new RedisStore({ client, failure: "throw", timeoutMs: 10_000 });
    const pool = new ConcurrencyLimiter({ limit: 2, leaseMs: 60_000, store, namespace: uniq("t") });
    const calls = async () => {
      const info = await client.info("commandstats");
      return [...info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    };
    await pool.acquire("warm"); // loads the script (EVALSHA, NOSCRIPT, EVAL)
    const before = await calls();
    const a = await pool.acquire("tenant:7");
    expect(await calls()).toBe(before + 1);
    const key = `rk:{${pool.namespace}:tenant:7}:c`;
    const ttl = await client.pttl(key);
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect(await client.zcard(key)).toBe(1);
    await a.release();
    expect(await client.exists(key)).toBe(0); // no leases: nothing left behind
  });

  for (const topology of ["single redis-server", "3-master cluster"] as const) {
    describe(`${topology}, every core busy`, () => {
      let load: CpuLoad;
      let holders: Holder[] = [];
      let admin: Redis | Cluster;
      beforeAll(async () => {
        const isCluster = topology !== "single redis-server";
        const nodes = isCluster ? cluster.nodes : [{ host: redis.host, port: redis.port }];
        admin = isCluster ? new Cluster(nodes) : new Redis(redis.port, redis.host);
        holders = await Promise.all(Array.from({ length: 4 }, () => Holder.start({ nodes, cluster: isCluster, tallyPort: tally.port })));
        load = saturateCpu();
      });
      afterAll(async () => {
        await load?.stop();
        await Promise.all(holders.map((h) => h.stop()));
        admin?.disconnect();
      });

      it("4 processes x 40 holders, limit 10: never more than 10 held at once (independent tally); every slot comes back", async () => {
        const job = { key: "tenant:7", namespace: uniq("loop"), limit: LIMIT, leaseMs: 30_000, holders: 40, rounds: 25 };
        const done = holders.map((h) =>
          h.next<{ holds: number; refusals: number; errors: number; maxTally: number; sawFull: boolean }>("done"),
        );
        for (const h of holders) h.send({ type: "loop", ...job });
        const results = await Promise.all(done);
        expect(results.map((r) => r.errors)).toEqual([0, 0, 0, 0]);
        expect(Math.max(...results.map((r) => r.maxTally))).toBeLessThanOrEqual(LIMIT);
        expect(results.some((r) => r.sawFull)).toBe(true); // the limit was reached: the bound was tested
        expect(results.reduce((n, r) => n + r.refusals, 0)).toBeGreaterThan(0);
        expect(results.reduce((n, r) => n + r.holds, 0)).toBeGreaterThan(0);
        // Every slot came back: nothing held, the set gone, the tally at zero.
        const pool = new ConcurrencyLimiter({
          limit: LIMIT,
          store: new RedisStore({ client: admin, failure: "throw" }),
          namespace: job.namespace,
        });
        expect(await pool.peek(job.key)).toEqual({ remaining: LIMIT, retryAfterMs: 0, reason: undefined });
        expect(await admin.exists(`rk:{${job.namespace}:${job.key}}:c`)).toBe(0);
        const t = new Redis(tally.port, tally.host);
        expect(Number(await t.get(`tally:${job.namespace}`))).toBe(0);
        t.disconnect();
      });

      it("a process holding every lease is killed with SIGKILL: the key stays full until leaseMs passes, then is free", async () => {
        const leaseMs = 3_000;
        const job = { key: "tenant:9", namespace: uniq("kill"), limit: LIMIT, leaseMs };
        const victim = await Holder.start({
          nodes: topology === "single redis-server" ? [{ host: redis.host, port: redis.port }] : cluster.nodes,
          cluster: topology !== "single redis-server",
          tallyPort: tally.port,
        });
        const grabbed = victim.next<{ ids: string[] }>("grabbed");
        const askedAt = performance.now();
        victim.send({ type: "grab", ...job });
        expect((await grabbed).ids).toHaveLength(LIMIT);
        await victim.stop(true);
        const pool = new ConcurrencyLimiter({
          limit: LIMIT,
          leaseMs,
          store: new RedisStore({ client: admin, failure: "throw" }),
          namespace: job.namespace,
        });
        // Full: every acquire is refused, each saying when the first slot frees, until it does.
        let refused = 0;
        let freedAt = 0;
        for (;;) {
          const lease = await pool.acquire(job.key);
          if (lease.acquired) {
            freedAt = performance.now();
            await lease.release();
            break;
          }
          refused++;
          expect(lease.reason).toBe("limit");
          expect(lease.retryAfterMs).toBeGreaterThan(0);
          expect(lease.retryAfterMs).toBeLessThanOrEqual(leaseMs);
          await new Promise((r) => setTimeout(r, Math.min(lease.retryAfterMs, 250)));
        }
        expect(refused).toBeGreaterThan(1);
        // Not before the leases could have expired (they were taken after askedAt): a lower bound only.
        expect(freedAt - askedAt).toBeGreaterThanOrEqual(leaseMs - 50);
        // Then every slot frees (the victim took its leases a few ms apart), and all can be taken again.
        for (;;) {
          const c = await pool.peek(job.key);
          if (c.remaining === LIMIT) break;
          expect(c.retryAfterMs).toBeLessThanOrEqual(leaseMs);
          await new Promise((r) => setTimeout(r, Math.max(1, c.retryAfterMs)));
        }
        const leases = await Promise.all(Array.from({ length: LIMIT }, () => pool.acquire(job.key)));
        expect(leases.every((l) => l.acquired)).toBe(true);
        await Promise.all(leases.map((l) => l.release()));
      });
    });
  }
});
