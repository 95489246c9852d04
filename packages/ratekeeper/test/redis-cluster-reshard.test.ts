/**
 * A Redis Cluster resharding while decisions run: the slot of a key with several limits is
 * moved from one master to another, its keys migrated one at a time (so for a while some of a
 * decision's keys are on the old master and some on the new one: TRYAGAIN; then all on the new
 * one: ASK, where the script is not loaded yet: NOSCRIPT). Decisions must keep coming from
 * Redis (never from the failure policy), exact over the whole move.
 */
import { Redis } from "ioredis";
import { createCluster } from "redis";
import { expect, it } from "vitest";
import { rawCommand } from "../../../test-support/redis.js";
import { describeRedis } from "../../../test-support/redis.js";
import { RateLimiter } from "../src/index.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { redisClusterFixture } from "./redis-store-support.js";

describeRedis("RedisStore on a cluster: a slot moved while decisions run", () => {
  const fx = redisClusterFixture();

  it.each(["ioredis", "node-redis"])(
    "%s: several limits on a key whose slot is migrating: exact, no failure-policy decision",
    async (lib) => {
      const nodeRedis =
        lib === "node-redis"
          ? createCluster({ rootNodes: fx.cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) })
          : undefined;
      await nodeRedis?.connect();
      const key = `moving-${lib}`;
      const limiter = new RateLimiter({
        limits: [
          { algorithm: "fixed-window", limit: 40, window: "1h" },
          { algorithm: "sliding-window", limit: 45, window: "1h" },
        ],
        store: new RedisStore({ client: nodeRedis ?? fx.client, failure: "throw", timeoutMs: 10_000 }),
      });
      let allowed = 0;
      const failed: string[] = [];
      const count = (d: { allowed: boolean }) => void (d.allowed && allowed++);
      const settle = (p: Promise<{ allowed: boolean }>) => p.then(count, (e: unknown) => void failed.push(String(e)));
      count(await limiter.consume(key));
      // The key's state keys, and the master holding them.
      const masters = fx.cluster.nodes.slice(0, 3);
      let source: { port: number; keys: string[] } | undefined;
      for (const n of masters) {
        const c = new Redis(n.port, n.host);
        const keys = (await c.keys(`*${key}*`)).sort();
        c.disconnect();
        if (keys.length > 0) source = { port: n.port, keys };
      }
      if (!source) throw new Error("no state keys found");
      expect(source.keys.length).toBeGreaterThanOrEqual(2);
      const src = source;
      const slot = await rawCommand(src.port, ["CLUSTER", "KEYSLOT", src.keys[0] as string]);
      const slotNo = slot.replace(/\D/g, "");
      const target = masters.find((n) => n.port !== src.port) as { port: number; host: string };
      const idOf = async (port: number) => (await rawCommand(port, ["CLUSTER", "MYID"])).split("\r\n")[1] as string;
      const srcId = await idOf(src.port);
      const dstId = await idOf(target.port);
      await rawCommand(target.port, ["CLUSTER", "SETSLOT", slotNo, "IMPORTING", srcId]);
      await rawCommand(src.port, ["CLUSTER", "SETSLOT", slotNo, "MIGRATING", dstId]);
      const migrate = (key: string) => rawCommand(src.port, ["MIGRATE", target.host, String(target.port), key, "0", "5000"], 6000);
      // Half the decision's keys moved: the script on the old master finds some keys gone.
      await migrate(src.keys[0] as string);
      const during = Array.from({ length: 30 }, () => settle(limiter.consume(key)));
      await new Promise((r) => setTimeout(r, 50));
      for (const k of src.keys.slice(1)) await migrate(k);
      // Calls now go to the new master by ASK, where the script was never loaded.
      const asked = Array.from({ length: 30 }, () => settle(limiter.consume(key)));
      await new Promise((r) => setTimeout(r, 50));
      for (const n of masters) await rawCommand(n.port, ["CLUSTER", "SETSLOT", slotNo, "NODE", dstId]);
      await Promise.all([...during, ...asked]);
      for (let i = 0; i < 20; i++) await settle(limiter.consume(key));
      expect(failed.slice(0, 3)).toEqual([]);
      expect(allowed).toBe(40);
      await nodeRedis?.close();
    },
    120_000,
  );
});
