import { Counter, Gauge, type Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { DecisionCounts } from "./decision-counts.js";
import { FastHistogram } from "./histogram.js";
import { EnvoyStats, type EnvoyStatsOptions } from "./envoy-stats.js";
import type { DecisionObserver, LimitStatKey } from "./service/types.js";

const BREAKER = { closed: 0, "half-open": 1, open: 2 } as const;

/**
 * The service's Prometheus metrics. Decisions are counted in numbers of their own on the hot
 * path (decision-counts.ts) and flushed into prom-client at scrape time (`collect`): a labelled
 * `inc()` per decision hashes its labels every call, which costs measurable throughput at tens
 * of thousands of checks/s. The store latency and the Redis round trip are `FastHistogram`s
 * (histogram.ts), envoyproxy/ratelimit's per-limit stats are batched the same way
 * (envoy-stats.ts); test/metrics-scrape.test.ts checks that the scrape is byte for byte what
 * prom-client told every event would show.
 *
 * - `ratekeeper_decisions_total{domain,rule,outcome}`: outcome is `ok`, `over_limit`,
 *   `shadow_over_limit` (a shadow rule would have denied), `unlimited`, `no_match`, `replaced`
 *   (another descriptor of the request `replaces` the rule's name), `blocked`, `refunded` (counted
 *   `ok`, then given back: its check or batch was answered with an error; taken from `ok`).
 * - `ratekeeper_store_latency_seconds`: histogram of one store call (consume / peek). With the
 *   in-memory store about one call in 64 is timed and the others counted at the last timed
 *   latency (`storeLatencyAgain`): `_count` is every call, the buckets and `_sum` estimates.
 * - `ratekeeper_store_errors_total{kind}`: `error` (the store threw) or `failure_policy`
 *   (the store failed and its failure policy or insurance store decided).
 * - `ratekeeper_config_reloads_total{result}`: `ok` or `failed` (the last good rules stay).
 * - `ratekeeper_config_last_reload_success`: 1 if the last reload attempt succeeded.
 * - `ratekeeper_rules`: rules in force. Plus Node's default process metrics.
 * - `ratekeeper_decision_reasons_total{reason}`: decisions with a reason: `limit`, `denial-cache`,
 *   `overloaded` (backpressure), `degraded`, `store-error`, `insurance` (the last three: Redis was down).
 * - With Redis: `ratekeeper_redis_breaker_state` (0 closed, 1 half-open, 2 open),
 *   `ratekeeper_redis_pending` (decisions waiting for Redis: the queue depth),
 *   `ratekeeper_redis_overloaded_total` (denied by backpressure), `ratekeeper_redis_instances`
 *   (N for the degraded policy), `ratekeeper_redis_round_trip_seconds` (histogram of each call to Redis).
 * - With the in-memory store: `ratekeeper_memory_store_keys` and `ratekeeper_memory_store_bytes`
 *   (held now; bytes as the store estimates them), `ratekeeper_memory_store_max_keys` and
 *   `ratekeeper_memory_store_max_bytes` (the bounds: older keys are dropped to stay within them).
 * - envoyproxy/ratelimit's per-limit stats, `ratelimit_service_rate_limit_*{domain,key1,key2}`:
 *   see envoy-stats.ts.
 * @example const m = new Metrics(); const svc = new DecisionService({ store, rules, observer: m });
 */
export class Metrics implements DecisionObserver {
  readonly registry = new Registry();
  /** Decisions by domain, rule and outcome since the last scrape: no strings built per decision. */
  private readonly counts = new DecisionCounts();
  private readonly decisions: Counter<"domain" | "rule" | "outcome">;
  private readonly latency: Histogram;
  private readonly storeErrors: Counter<"kind">;
  private readonly reloads: Counter<"result">;
  private readonly reasons: Counter<"reason">;
  private readonly roundTrip: Histogram;
  private breakerState: "closed" | "half-open" | "open" = "closed";
  private readonly lastReload: Gauge;
  readonly rules: Gauge;
  private readonly envoy: EnvoyStats;

  constructor(options: EnvoyStatsOptions = {}) {
    const counts = this.counts;
    this.decisions = new Counter({
      name: "ratekeeper_decisions_total",
      help: "Rate limit decisions by domain, rule and outcome (shadow_over_limit: a shadow rule would have denied).",
      labelNames: ["domain", "rule", "outcome"],
      registers: [this.registry],
      collect() {
        counts.flush((labels, n) => this.inc(labels, n));
      },
    });
    // `registry.resetMetrics()`: the counts not handed over yet go too, as prom-client's would.
    const reset = this.decisions.reset.bind(this.decisions);
    this.decisions.reset = () => {
      counts.clear();
      reset();
    };
    this.latency = this.histogram(
      "ratekeeper_store_latency_seconds",
      "Latency of one store call (consume or peek). In-memory store: about 1 call in 64 timed, the others counted at the last timed latency (_count is every call; buckets and _sum are estimates). Other stores: every call timed.",
      [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
    );
    this.storeErrors = this.counter(
      "ratekeeper_store_errors_total",
      "Store failures: error (surfaced) or failure_policy (failOpen/failClosed/insurance decided).",
      "kind",
    );
    this.reloads = this.counter(
      "ratekeeper_config_reloads_total",
      "Rules reloads by result (failed: the last good rules stay in force).",
      "result",
    );
    this.lastReload = new Gauge({
      name: "ratekeeper_config_last_reload_success",
      help: "1 if the last rules reload succeeded, else 0.",
      registers: [this.registry],
    });
    this.rules = new Gauge({ name: "ratekeeper_rules", help: "Rules in force.", registers: [this.registry] });
    this.reasons = this.counter(
      "ratekeeper_decision_reasons_total",
      "Decisions by reason: limit, denial-cache, overloaded (backpressure), degraded, store-error, insurance (Redis was down).",
      "reason",
    );
    this.roundTrip = this.histogram(
      "ratekeeper_redis_round_trip_seconds",
      "Time from sending a call to Redis to its reply (a batch counts once).",
      [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    );
    this.reloads.inc({ result: "ok" }, 0);
    this.reloads.inc({ result: "failed" }, 0);
    this.lastReload.set(1);
    this.envoy = new EnvoyStats(this.registry, options);
    collectDefaultMetrics({ register: this.registry });
  }

  /** A counter with one label, in this registry. */
  private counter<L extends string>(name: string, help: string, label: L): Counter<L> {
    return new Counter({ name, help, labelNames: [label], registers: [this.registry] });
  }

  private histogram(name: string, help: string, buckets: number[]): Histogram {
    return new FastHistogram({ name, help, buckets, registers: [this.registry] });
  }

  /** Reports the in-memory store's keys and estimated bytes, and its bounds, at each scrape. */
  watchMemoryStore(store: { readonly size: number; readonly bytes: number; readonly maxKeys: number; readonly maxBytes: number }): void {
    const gauges: [string, string, () => number][] = [
      ["ratekeeper_memory_store_keys", "Keys held by the in-memory store.", () => store.size],
      ["ratekeeper_memory_store_bytes", "Bytes the in-memory store's keys take, as it estimates them per key.", () => store.bytes],
      ["ratekeeper_memory_store_max_keys", "The in-memory store's bound on keys (older keys are dropped).", () => store.maxKeys],
      [
        "ratekeeper_memory_store_max_bytes",
        "The in-memory store's bound on its estimated bytes (older keys are dropped).",
        () => store.maxBytes,
      ],
    ];
    for (const [name, help, read] of gauges) {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read());
        },
      });
    }
  }

  /** Reports a Redis store's breaker, queue depth, backpressure and instance count at each scrape. */
  watchRedisStore(store: { stats(): { pending: number; overloaded: number; instances: number } }): void {
    const breaker = () => BREAKER[this.breakerState];
    const gauges: [string, string, () => number][] = [
      ["ratekeeper_redis_breaker_state", "The Redis store's circuit breaker: 0 closed, 1 half-open, 2 open.", breaker],
      ["ratekeeper_redis_pending", "Decisions waiting for Redis (queued or sent).", () => store.stats().pending],
      [
        "ratekeeper_redis_overloaded_total",
        "Decisions denied by backpressure (reason overloaded) since start.",
        () => store.stats().overloaded,
      ],
      ["ratekeeper_redis_instances", "Instances the degraded policy divides limits by.", () => store.stats().instances],
    ];
    for (const [name, help, read] of gauges) {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read());
        },
      });
    }
  }

  /** The Redis store's breaker changed. */
  breaker(state: "closed" | "half-open" | "open"): void {
    this.breakerState = state;
  }

  /** One call to Redis took `seconds`. */
  redisRoundTrip(seconds: number): void {
    this.roundTrip.observe(seconds);
  }

  decisionReason(reason: string): void {
    this.reasons.inc({ reason });
  }

  decision(domain: string, rule: string, outcome: string): void {
    this.counts.count(domain, rule, outcome);
  }

  refunded(domain: string, rule: string): void {
    this.counts.refunded(domain, rule);
  }

  limitHit(stat: LimitStatKey, limit: number, usedBefore: number, cost: number): void {
    this.envoy.hit(stat, limit, usedBefore, cost);
  }

  limitRefunded(stat: LimitStatKey, limit: number, usedBefore: number, cost: number): void {
    this.envoy.refunded(stat, limit, usedBefore, cost);
  }

  storeLatency(seconds: number): void {
    this.lastLatency = seconds;
    this.latency.observe(seconds);
  }

  /** The last latency given to {@link storeLatency}, for {@link storeLatencyAgain}. */
  private lastLatency: number | undefined;

  /** One more store call, untimed: counted at the last timed latency (service/store-call.ts). */
  storeLatencyAgain(): void {
    if (this.lastLatency !== undefined) this.latency.observe(this.lastLatency);
  }

  storeError(kind: "error" | "failure_policy"): void {
    this.storeErrors.inc({ kind });
  }

  reload(ok: boolean): void {
    this.reloads.inc({ result: ok ? "ok" : "failed" });
    this.lastReload.set(ok ? 1 : 0);
    this.envoy.configLoad(ok);
  }

  rlsError(kind: "service_error" | "redis_error"): void {
    this.envoy.callError(kind);
  }

  rlsGlobalShadow(): void {
    this.envoy.globalShadow();
  }

  /** The rules were loaded at start (envoyproxy/ratelimit counts it as a config load). */
  loaded(): void {
    this.envoy.configLoad(true);
  }
}
