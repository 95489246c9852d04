/**
 * The service's Redis store: the client, the RedisStore with the operator's failure policy and
 * timeout, and what operations need from it: metrics (breaker state, decisions waiting, the
 * round trip to Redis), logs (each breaker change; failures at most once per interval, with a
 * count), and a readiness check that notices a frozen or unreachable Redis within about 2 s even
 * with no traffic (a ping every half second through the store's own watchdog and breaker).
 */
import type { Cluster, Redis } from "ioredis";
import { MemoryStore } from "ratekeeper";
import { RedisStore, type BreakerEvent, type BreakerState } from "ratekeeper/redis";
import type { Logger } from "./log.js";
import type { Metrics } from "./metrics.js";
import { createRedisClient } from "./redis-client.js";
import type { RedisConnection } from "./redis-connection.js";

/** The failure policies the service offers (the library's, with `insurance` meaning a per-process MemoryStore). */
export type RedisFailureName = "degraded" | "open" | "closed" | "insurance" | "throw";
export const REDIS_FAILURES: readonly RedisFailureName[] = ["degraded", "open", "closed", "insurance", "throw"];

/** How often readiness pings Redis, and how often failures are logged at most. */
const PING_MS = 500;
const LOG_EVERY_MS = 10_000;
/** How long a new connection may wait for its ready check before it is made again (see reconnectWhenSilent). */
const READY_CHECK_MS = 2_000;

export interface ServiceRedisOptions {
  /** Which Redis: a single one, a Cluster or Sentinel's master (redis-connection.ts). */
  connection: RedisConnection;
  /** @default "degraded" */
  failure?: RedisFailureName | undefined;
  /** The store's `timeoutMs` (0: none). @default the library's (1000) */
  timeoutMs?: number | undefined;
  logger: Logger;
  metrics: Metrics;
}

/** A Redis store opened for the service. */
export interface ServiceRedis {
  readonly store: RedisStore;
  /** An ioredis `Redis` (single, Sentinel) or `Cluster`. */
  readonly client: Redis | Cluster;
  /** The breaker's state (`closed` while Redis answers). */
  state(): BreakerState;
  /** Stops the pings, leaves the instance registry, closes the client. */
  close(): Promise<void>;
}

/**
 * Opens the client and the store. The client fails commands at once while disconnected (no
 * offline queue: the store's breaker answers instead) and reconnects every 50-500 ms, so the
 * service follows Redis back within about a second (createRedisClient has the details for a
 * Cluster and for Sentinel). On a Cluster the store has a breaker per hash slot: a master that
 * fails turns only its slots over to the failure policy, and its promoted replica takes them back.
 */
export function openServiceRedis(o: ServiceRedisOptions): ServiceRedis {
  const { metrics } = o;
  const client = createRedisClient(o.connection);
  const silence = reconnectWhenSilent(client);
  client.on("error", () => undefined); // connection errors reach the store as failed calls; logged below, rate-limited
  client.on("node error", () => undefined); // the same, from one node of a Cluster
  const failure = o.failure ?? "degraded";
  const log = new StoreLog(o.logger, failure);
  const store = new RedisStore({
    client,
    failure: failure === "insurance" ? { insurance: new MemoryStore() } : failure,
    ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
    onError: (e) => log.failed(e),
    onStateChange: (e) => {
      metrics.breaker(e.to);
      if (e.to === "open") silence.opened();
      log.changed(e);
    },
    onRoundTrip: (ms) => metrics.redisRoundTrip(ms / 1000),
  });
  metrics.watchRedisStore(store);
  const flushLog = setInterval(() => log.tick(), LOG_EVERY_MS);
  flushLog.unref();
  let pinging = false;
  const ping = setInterval(() => {
    if (pinging) return;
    pinging = true;
    void store.ping().finally(() => (pinging = false));
  }, PING_MS);
  ping.unref();
  return {
    store,
    client,
    state: () => store.state,
    async close() {
      clearInterval(ping);
      clearInterval(flushLog);
      silence.stop();
      await store.close();
      await client.quit().catch(() => client.disconnect());
    },
  };
}

/**
 * What the service logs about the Redis store, so that an outage reads as a few lines, never a
 * line per request or per probe. While Redis is away the breaker probes it every 100-500 ms
 * (open -> half-open -> open): those go to debug; the operator reads one warning when it opens,
 * a reminder every LOG_EVERY_MS, and one line when it closes, with how long Redis was away.
 * Failed calls are counted and logged once per LOG_EVERY_MS with the first one's message.
 */
class StoreLog {
  private failures = 0;
  private firstFailure = "";
  /** Since when the breaker has been away from closed, its probes, and the last failure's cause. */
  private outage: { since: number; probes: number; cause: string } | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly failure: RedisFailureName,
  ) {}

  failed(e: Error): void {
    if (this.failures++ === 0) this.firstFailure = e.message;
  }

  changed(e: BreakerEvent): void {
    const { logger, failure, outage } = this;
    if (e.to === "closed") {
      if (outage === undefined) return;
      logger.info({ from: e.from, outageMs: Date.now() - outage.since, probes: outage.probes, failure }, "redis answers again");
      this.outage = undefined;
    } else if (outage === undefined) {
      this.outage = { since: Date.now(), probes: 0, cause: e.cause };
      logger.warn({ from: e.from, to: e.to, cause: e.cause, failure }, "redis store breaker open: the failure policy answers");
    } else {
      if (e.to === "half-open") outage.probes++;
      else outage.cause = e.cause;
      logger.debug({ from: e.from, to: e.to, cause: e.cause }, "redis store breaker");
    }
  }

  /** Every LOG_EVERY_MS: the reminder of an outage, and the failures counted since the last tick. */
  tick(): void {
    const { logger, failure, outage } = this;
    if (outage !== undefined) {
      logger.warn(
        { outageMs: Date.now() - outage.since, probes: outage.probes, cause: outage.cause, failure },
        "redis still away: the failure policy answers",
      );
    }
    if (this.failures === 0) return;
    logger.warn(
      { failures: this.failures, first: this.firstFailure, failure, intervalMs: LOG_EVERY_MS },
      "redis store failures: the failure policy decided",
    );
    this.failures = 0;
  }
}

/**
 * A Redis that stops answering with its connection still open (frozen, or cut off by a network
 * partition) is never left by ioredis, which reconnects only when a connection closes; meanwhile
 * Sentinel promotes a replica (ioredis#1314), or a DNS name moves to a new primary. So the
 * connection is destroyed (not ended: a graceful close waits for the silent server, and would land
 * when it answers again, after the store has recovered) and ioredis makes a new one, asking the
 * sentinels (or DNS) again: when the breaker opens while ioredis still thinks the connection
 * "ready", and when a new connection stays in "connect" (its ready check unanswered: connected to
 * a silent server) for 2 s. Not on a Cluster: its slot map, reloaded every second, moves a silent
 * master's slots to the replica replacing it.
 */
function reconnectWhenSilent(client: Redis | Cluster): { opened(): void; stop(): void } {
  if (client.isCluster) return { opened: () => undefined, stop: () => undefined };
  // `stream` is undefined until the first connection.
  const drop = () => ((client as Redis).stream as Redis["stream"] | undefined)?.destroy();
  let connectedMs = 0;
  client.on("connect", () => (connectedMs = performance.now()));
  const stuck = setInterval(() => {
    if (client.status === "connect" && performance.now() - connectedMs > READY_CHECK_MS) {
      connectedMs = performance.now();
      drop();
    }
  }, PING_MS);
  stuck.unref();
  let droppedMs = -Infinity;
  return {
    // At most every 2 s: a breaker that opens on errors from a live connection (OOM, say) would
    // otherwise have it made again at every failed probe.
    opened: () => {
      if (client.status !== "ready" || performance.now() - droppedMs < READY_CHECK_MS) return;
      droppedMs = performance.now();
      drop();
    },
    stop: () => clearInterval(stuck),
  };
}
