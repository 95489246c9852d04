/**
 * The ioredis client for each Redis topology (redis-connection.ts resolves which), with the
 * options that keep the store's breaker and failure policy in charge: no offline queue, no
 * command sent twice, reconnects every 50-500 ms, a failover followed within about a second.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { ConnectionOptions } from "node:tls";
import type { RedisAddress, RedisConnection, RedisTls } from "./redis-connection.js";

/** Node TLS options from ours. */
export function tlsOptions(t: RedisTls): ConnectionOptions {
  return {
    ...(t.ca !== undefined ? { ca: t.ca } : {}),
    ...(t.cert !== undefined ? { cert: t.cert } : {}),
    ...(t.key !== undefined ? { key: t.key } : {}),
    // The chain is still verified (rejectUnauthorized stays on); only the name check is skipped.
    ...(t.skipHostnameVerification ? { checkServerIdentity: () => undefined } : {}),
  };
}

/** Reconnect every 50-500 ms, forever: the service follows Redis back within about a second. */
const reconnect = (times: number): number => Math.min(times * 50, 500);

/**
 * The ioredis client for a connection. A command whose connection is lost is never sent again
 * (`autoResendUnfulfilledCommands: false`, and on a Cluster no retry after a lost node): it may
 * have been executed, and a check charges the limit. It fails, and the failure policy answers;
 * commands fail at once while a connection is down (no offline queue: the store's breaker answers
 * instead). A Cluster reloads its slot map every second and on every redirection, so a replica
 * promoted by a failover is used within about a second of its promotion. Under Sentinel the client
 * asks the sentinels for the master at every reconnect (every 50-500 ms while it is down); a
 * server that answers READONLY (a master demoted to replica) is left for the new master. ioredis's
 * `failoverDetector` (subscribing to the sentinels' `+switch-master`) stays off: with it, a client
 * still reconnecting when the switch was announced ended for good ("Connection is closed." on
 * every call) in 4 of 5 runs of redis-sentinel.test.ts (ioredis 6.0.0).
 */
export function createRedisClient(c: RedisConnection): Redis | Cluster {
  const auth: RedisOptions = {
    ...(c.username !== undefined ? { username: c.username } : {}),
    ...(c.password !== undefined ? { password: c.password } : {}),
    ...(c.tls ? { tls: tlsOptions(c.tls) } : {}),
    autoResendUnfulfilledCommands: false,
  };
  const common: RedisOptions = { ...auth, maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: reconnect };
  switch (c.type) {
    case "single":
      return new Redis({ ...common, ...(c.path !== undefined ? { path: c.path } : (c.nodes[0] as RedisAddress)), db: c.db ?? 0 });
    case "sentinel":
      return new Redis({
        ...common,
        db: c.db ?? 0,
        name: c.masterName,
        sentinels: c.nodes,
        ...(c.sentinelUsername !== undefined ? { sentinelUsername: c.sentinelUsername } : {}),
        ...(c.sentinelPassword !== undefined ? { sentinelPassword: c.sentinelPassword } : {}),
        ...(c.tls ? { enableTLSForSentinelMode: true, sentinelTLS: tlsOptions(c.tls) } : {}),
        sentinelRetryStrategy: reconnect,
        reconnectOnError: (e) => (e.message.startsWith("READONLY") ? 1 : false),
      });
    case "cluster": {
      const options: ClusterOptions = {
        enableOfflineQueue: false,
        clusterRetryStrategy: reconnect,
        slotsRefreshInterval: 1000,
        // 0: a command on a node that went away fails instead of being sent again elsewhere.
        retryDelayOnFailover: 0,
        // The node connections are the Cluster's (they reconnect through it); only these pass through.
        redisOptions: auth,
      };
      const cluster = new Cluster(c.nodes, options);
      // A node's connection is opened on its first command, and further commands meeting it
      // still connecting would fail (no offline queue): open each as soon as the client learns of
      // the node (at start, and a replica promoted by a failover).
      cluster.on("+node", (node: Redis) => {
        if (node.status === "wait") node.connect().catch(() => undefined);
      });
      return cluster;
    }
  }
}

/**
 * Resolves when the client is ready (on a Cluster: its slot map loaded and a connection to every
 * master up), or rejects after `timeoutMs`.
 */
export async function redisReady(client: Redis | Cluster, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const ready = () =>
    client.status === "ready" && (!(client instanceof Cluster) || client.nodes("master").every((n) => n.status === "ready"));
  while (!ready()) {
    if (performance.now() > deadline) throw new Error(`redis not ready after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
