/**
 * The service's Prometheus scrape (src/metrics.ts, with histogram.ts and envoy-stats.ts) against
 * plain prom-client told every event as it happens: for random sequences of decisions, store
 * latencies (timed, and untimed calls counted at the last timed latency), Redis round trips,
 * reasons, errors, reloads and envoyproxy/ratelimit's per-limit hits, scraped at random points,
 * every scrape is byte-identical (Node's default process metrics left out). The metrics batch
 * the hot-path counts and hand them over at scrape time; this is what keeps that batching
 * invisible: the same series, the same values to the last bit of a histogram's sum, in the same
 * order.
 */
import fc from "fast-check";
import { Counter, Gauge, Histogram, Registry, type Metric } from "prom-client";
import { describe, expect, it } from "vitest";
import { Metrics } from "../src/metrics.js";
import type { DecisionObserver, LimitStatKey } from "../src/service/types.js";

type Outcome = Parameters<DecisionObserver["decision"]>[2];
type Labels = Record<string, string>;

/** The families a scrape shows, less Node's default process metrics (they change by themselves). */
function ownFamilies(text: string): string {
  const blocks = text.replace(/\n$/, "").split("\n\n");
  return `${blocks.filter((block) => !/^# HELP (process_|nodejs_)/.test(block)).join("\n\n")}\n`;
}

/** `getMetricsAsJSON()` (what `get()` gives, as aggregators read it), less Node's process metrics. */
function ownJSON(metrics: { name: string }[]): { name: string }[] {
  return metrics.filter((x) => !/^(process_|nodejs_)/.test(x.name));
}

/** Plain prom-client metrics declared as `m`'s (names, help, labels, buckets), told every event. */
class Plain {
  readonly registry = new Registry();
  private readonly byName = new Map<string, Metric>();
  private readonly keys = new Map<string, Labels>();
  private valuedKeys = 0;
  /** The last store latency told, for an untimed call. */
  lastLatency: number | undefined;

  constructor(
    m: Metrics,
    private readonly nearRatio: number,
    private readonly maxValuedKeys: number,
  ) {
    for (const x of m.registry.getMetricsAsArray()) {
      const d = x as unknown as { name: string; help: string; type: string; labelNames: string[]; upperBounds?: number[] };
      if (/^(process_|nodejs_)/.test(d.name)) continue;
      const config = { name: d.name, help: d.help, labelNames: [...d.labelNames], registers: [this.registry] };
      const made =
        d.type === "counter"
          ? new Counter(config)
          : d.type === "gauge"
            ? new Gauge(config)
            : new Histogram({ ...config, buckets: [...(d.upperBounds ?? [])] });
      this.byName.set(d.name, made);
    }
    this.counter("ratekeeper_config_reloads_total").inc({ result: "ok" }, 0);
    this.counter("ratekeeper_config_reloads_total").inc({ result: "failed" }, 0);
    this.gauge("ratekeeper_config_last_reload_success").set(1);
  }

  counter(name: string): Counter {
    return this.byName.get(name) as Counter;
  }
  gauge(name: string): Gauge {
    return this.byName.get(name) as Gauge;
  }
  histogram(name: string): Histogram {
    return this.byName.get(name) as Histogram;
  }

  /** envoyproxy/ratelimit's base limiter, in float32 as it counts: each stat told its units. */
  hit(stat: LimitStatKey, limit: number, used: number, cost: number): void {
    const labels = this.labelsOf(stat);
    const near = Math.floor(Math.fround(Math.fround(limit) * this.nearRatio));
    const after = used + cost;
    const add = (what: string, n: number) => {
      if (n > 0) this.counter(`ratelimit_service_rate_limit_${what}`).inc(labels, n);
    };
    add("total_hits", cost);
    if (after > limit) {
      const over = used >= limit ? cost : after - limit;
      add("over_limit", over);
      if (used < limit) add("near_limit", limit - Math.max(near, used));
      if (stat.shadow) add("shadow_mode", over);
    } else {
      if (after > near) add("near_limit", used >= near ? cost : after - near);
      add("within_limit", cost);
    }
  }

  /** A stat key's labels; valued keys past the cap count under their domain's `(overflow)`. */
  private labelsOf(stat: LimitStatKey): Labels {
    const known = this.keys.get(stat.key);
    if (known !== undefined) return known;
    if (stat.valued && this.valuedKeys >= this.maxValuedKeys) return { domain: stat.domain, key1: "(overflow)" };
    if (stat.valued) this.valuedKeys++;
    const parts = stat.key.split(".");
    const labels: Labels = { domain: parts[0] ?? "", key1: parts[1] ?? "" };
    if (parts.length > 2) labels.key2 = parts[2] ?? "";
    this.keys.set(stat.key, labels);
    return labels;
  }
}

type Event =
  | { e: "decision"; domain: string; rule: string; outcome: Outcome; key: string | undefined }
  | { e: "hit"; stat: number; fresh: boolean; limit: number; used: number; cost: number }
  | { e: "latency"; seconds: number }
  | { e: "latencyAgain" }
  | { e: "roundTrip"; seconds: number }
  | { e: "reason"; reason: string }
  | { e: "storeError"; kind: "error" | "failure_policy" }
  | { e: "reload"; ok: boolean }
  | { e: "rlsError"; kind: "service_error" | "redis_error" }
  | { e: "globalShadow" }
  | { e: "loaded" }
  | { e: "scrape"; json?: boolean }
  | { e: "reset" };

const OUTCOMES: Outcome[] = ["ok", "over_limit", "shadow_over_limit", "unlimited", "no_match", "replaced", "blocked"];
const BOUNDS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
const seconds = fc.oneof(fc.double({ min: 0, max: 0.6, noNaN: true }), fc.constantFrom(...BOUNDS, 0, 2, 1e-7));

/** Stat keys as the service makes them: a rule's (one object), a valued one (new per request). */
const STATS: LimitStatKey[] = [
  { key: "api.user", domain: "api", valued: false, shadow: false },
  { key: "api.path_/x.user", domain: "api", valued: false, shadow: false },
  { key: "api.shadowed", domain: "api", valued: false, shadow: true },
  { key: "web.a.b.c", domain: "web", valued: false, shadow: false },
  { key: "api.user_1", domain: "api", valued: true, shadow: false },
  { key: "api.user_2", domain: "api", valued: true, shadow: false },
  { key: "web.ip_10_0_0_1", domain: "web", valued: true, shadow: true },
  { key: "web.ip_10_0_0_2", domain: "web", valued: true, shadow: false },
  { key: "(unknown).x_1", domain: "(unknown)", valued: true, shadow: false },
  // Keys of the same labels as another's: its domain's overflow, a deeper key's first three parts.
  { key: "api.(overflow)", domain: "api", valued: false, shadow: false },
  { key: "web.a.b.d", domain: "web", valued: true, shadow: false },
  { key: "web", domain: "web", valued: false, shadow: true },
  // A request's entries can spell a rule's key (`detailed_metric`, a value-less entry).
  { key: "api.user", domain: "api", valued: true, shadow: false },
];

const event: fc.Arbitrary<Event> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      e: fc.constant("decision" as const),
      // Unusual text too: empty, the same in domain and rule, characters a label value escapes.
      domain: fc.constantFrom("api", "web", "(unknown)", "", "api/user", 'a"b\\c\nd'),
      rule: fc.constantFrom("", "api/user", "web/ip", "api/path", "(overflow)", "api"),
      // An observer outside the service may report an outcome of its own.
      outcome: fc.oneof(fc.constantFrom(...OUTCOMES), fc.constantFrom("other", "__proto__", "") as unknown as fc.Arbitrary<Outcome>),
      key: fc.option(fc.constantFrom("api|u1", "web|ip"), { nil: undefined }),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      e: fc.constant("hit" as const),
      stat: fc.nat({ max: STATS.length - 1 }),
      fresh: fc.boolean(),
      limit: fc.nat({ max: 12 }),
      used: fc.nat({ max: 15 }),
      cost: fc.nat({ max: 4 }),
    }),
  },
  { weight: 4, arbitrary: fc.record({ e: fc.constant("latency" as const), seconds }) },
  { weight: 4, arbitrary: fc.constant({ e: "latencyAgain" as const }) },
  { weight: 2, arbitrary: fc.record({ e: fc.constant("roundTrip" as const), seconds }) },
  {
    weight: 1,
    arbitrary: fc.record({
      e: fc.constant("reason" as const),
      reason: fc.constantFrom("limit", "denial-cache", "overloaded", "degraded", "store-error", "insurance"),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ e: fc.constant("storeError" as const), kind: fc.constantFrom("error" as const, "failure_policy" as const) }),
  },
  { weight: 1, arbitrary: fc.record({ e: fc.constant("reload" as const), ok: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({ e: fc.constant("rlsError" as const), kind: fc.constantFrom("service_error" as const, "redis_error" as const) }),
  },
  { weight: 1, arbitrary: fc.constant({ e: "globalShadow" as const }) },
  { weight: 1, arbitrary: fc.constant({ e: "loaded" as const }) },
  { weight: 2, arbitrary: fc.record({ e: fc.constant("scrape" as const), json: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ e: "reset" as const }) },
);

/** Tells both the service's metrics and the plain ones one event. */
function tell(m: Metrics, p: Plain, x: Exclude<Event, { e: "scrape" }>): void {
  if (x.e === "reset") {
    // prom-client's `registry.resetMetrics()`: every series gone, each listed again when counted.
    m.registry.resetMetrics();
    p.registry.resetMetrics();
    return;
  }
  if (x.e === "latency") p.lastLatency = x.seconds;
  switch (x.e) {
    case "decision":
      m.decision(x.domain, x.rule, x.outcome);
      p.counter("ratekeeper_decisions_total").inc({ domain: x.domain, rule: x.rule, outcome: x.outcome });
      return;
    case "hit": {
      const s = STATS[x.stat] as LimitStatKey;
      m.limitHit(x.fresh ? { ...s } : s, x.limit, x.used, x.cost);
      p.hit(s, x.limit, x.used, x.cost);
      return;
    }
    case "latency":
      m.storeLatency(x.seconds);
      p.histogram("ratekeeper_store_latency_seconds").observe(x.seconds);
      return;
    case "latencyAgain":
      // An untimed store call: as long as the last timed one (none before the first).
      m.storeLatencyAgain();
      if (p.lastLatency !== undefined) p.histogram("ratekeeper_store_latency_seconds").observe(p.lastLatency);
      return;
    case "roundTrip":
      m.redisRoundTrip(x.seconds);
      p.histogram("ratekeeper_redis_round_trip_seconds").observe(x.seconds);
      return;
    case "reason":
      m.decisionReason(x.reason);
      p.counter("ratekeeper_decision_reasons_total").inc({ reason: x.reason });
      return;
    case "storeError":
      m.storeError(x.kind);
      p.counter("ratekeeper_store_errors_total").inc({ kind: x.kind });
      return;
    case "reload":
      m.reload(x.ok);
      p.counter("ratekeeper_config_reloads_total").inc({ result: x.ok ? "ok" : "failed" });
      p.gauge("ratekeeper_config_last_reload_success").set(x.ok ? 1 : 0);
      p.counter(`ratelimit_service_config_load_${x.ok ? "success" : "error"}`).inc();
      return;
    case "rlsError":
      m.rlsError(x.kind);
      p.counter("ratelimit_service_should_rate_limit_error").inc({ err_type: x.kind });
      return;
    case "globalShadow":
      m.rlsGlobalShadow();
      p.counter("ratelimit_service_global_shadow_mode").inc();
      return;
    case "loaded":
      m.loaded();
      p.counter("ratelimit_service_config_load_success").inc();
      return;
  }
}

describe("the /metrics scrape", () => {
  it("is byte-identical, at every scrape, to plain prom-client told every event", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(event, { maxLength: 300 }),
        fc.constantFrom(0.8, 0.5, 1, 0.3),
        fc.nat({ max: 5 }),
        async (events, nearLimitRatio, maxValuedKeys) => {
          const m = new Metrics({ nearLimitRatio, maxValuedKeys });
          const p = new Plain(m, Math.fround(nearLimitRatio), maxValuedKeys);
          for (const x of [...events, { e: "scrape" as const }]) {
            if (x.e !== "scrape") tell(m, p, x);
            else if (x.json === true) expect(ownJSON(await m.registry.getMetricsAsJSON())).toEqual(await p.registry.getMetricsAsJSON());
            else expect(ownFamilies(await m.registry.metrics())).toBe(await p.registry.metrics());
          }
        },
      ),
      {
        numRuns: 400,
        // A valued key past the cap (its domain's overflow), then a rule's key of the same text.
        examples: [
          [
            [
              { e: "hit", stat: STATS.length - 1, fresh: false, limit: 0, used: 0, cost: 0 },
              { e: "hit", stat: 0, fresh: false, limit: 0, used: 0, cost: 1 },
            ],
            0.8,
            0,
          ],
        ],
      },
    );
  });
});
