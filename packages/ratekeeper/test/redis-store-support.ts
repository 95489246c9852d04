/**
 * The fixture of the RedisStore test files (redis-store, redis-work, redis-counter): a
 * throw-away redis-server on a free loopback port, a client for the stores, an `admin` client
 * for the test's own reads (so the stores' command counts stay theirs), and `mk`, a limiter on
 * that server in a namespace of its own. Call it inside the file's `describeRedis`.
 */
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { startRedisCluster, type RedisClusterHandle } from "../../../test-support/redis-cluster.js";
import { RateLimiter, type LimitSpec } from "../src/index.js";
import { RedisStore, type RedisClientLike, type RedisStoreOptions } from "../src/stores/redis/index.js";

export interface RedisStoreFixture {
  readonly redis: RedisHandle;
  /** The client the stores made by `mk` use. */
  readonly client: Redis;
  /** A second client, for the test's own reads. */
  readonly admin: Redis;
  /** A namespace no other limiter of the process uses. */
  readonly ns: () => string;
  /** A limiter on the fixture's server (`failure: "throw"`, one instance: see below). */
  readonly mk: (
    spec: LimitSpec | { limits: LimitSpec[] },
    opts?: Partial<RedisStoreOptions>,
    clock?: () => number,
    namespace?: string,
  ) => RateLimiter;
}

let seq = 0;

/**
 * A throw-away Redis Cluster of three masters on free loopback ports, with an ioredis Cluster
 * client, for the files that run the store on a cluster. Call it inside the file's `describeRedis`.
 */
export function redisClusterFixture(): { readonly cluster: RedisClusterHandle; readonly client: Cluster } {
  let cluster: RedisClusterHandle | undefined;
  let client: Cluster | undefined;
  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    client = new Cluster(cluster.nodes);
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });
  return {
    get cluster() {
      return ready(cluster);
    },
    get client() {
      return ready(client);
    },
  };
}

/** `v`, once the fixture's beforeAll has set it. */
function ready<T>(v: T | undefined): T {
  if (v === undefined) throw new Error("the Redis fixture is used before its beforeAll ran");
  return v;
}

export function redisStoreFixture(): RedisStoreFixture {
  let redis: RedisHandle | undefined;
  let client: Redis | undefined;
  let admin: Redis | undefined;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
    admin = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    admin?.disconnect();
    await redis?.stop();
  });
  const fx: RedisStoreFixture = {
    get redis() {
      return ready(redis);
    },
    get client() {
      return ready(client);
    },
    get admin() {
      return ready(admin);
    },
    ns: () => `st${++seq}`,
    // Every store here has a fixed instance count (`instances: 1`): otherwise each one, from its
    // first use on, renews its entry in the instance registry every 5 s (a script with TIME and a
    // sorted set) until the process ends, and the tests that count the commands a decision makes
    // (INFO commandstats, server-wide) would count a heartbeat that fell inside their loop. Seen
    // under a saturated CPU, where the loops take longer: "zadd", "zcard", "time" in a sliding
    // log's 100 decisions.
    mk: (spec, opts = {}, clock, namespace = fx.ns()) =>
      new RateLimiter({
        ...spec,
        store: new RedisStore({ client: fx.client, failure: "throw", timeoutMs: 10_000, instances: 1, ...opts }),
        namespace,
        ...(clock ? { clock } : {}),
      }),
  };
  return fx;
}

/**
 * A client that passes every call to `io`, except the next script call (EVALSHA: a decision)
 * after `failNext()`, which it rejects as a closed connection would: one failed call, the
 * breaker still closed.
 */
export function failNextClient(io: () => Redis): { client: RedisClientLike; failNext: () => void } {
  let fail = false;
  const client: RedisClientLike = {
    evalsha: (...a: Parameters<Redis["evalsha"]>) => {
      if (!fail) return io().evalsha(...a);
      fail = false;
      return Promise.reject(new Error("Connection is closed."));
    },
    eval: (...a: Parameters<Redis["eval"]>) => io().eval(...a),
    del: (...keys: string[]) => io().del(...keys),
  };
  return { client, failNext: () => (fail = true) };
}

/**
 * A client on `io` whose every call (script, probe) fails while `ctl.down` is set, as a Redis gone
 * would: give several stores one `ctl` and they see one outage. `inFlight()` counts its script calls
 * not answered yet.
 */
export function outageClient(io: Redis, ctl: { down: boolean }): { client: RedisClientLike; inFlight: () => number } {
  let inFlight = 0;
  const fail = () => Promise.reject(new Error("Connection is closed."));
  const client: RedisClientLike = {
    evalsha: (...a: Parameters<Redis["evalsha"]>) => {
      if (ctl.down) return fail();
      inFlight++;
      return io.evalsha(...a).finally(() => inFlight--);
    },
    eval: (...a: Parameters<Redis["eval"]>) => (ctl.down ? fail() : io.eval(...a)),
    del: (...keys: string[]) => io.del(...keys),
  };
  return { client, inFlight: () => inFlight };
}
