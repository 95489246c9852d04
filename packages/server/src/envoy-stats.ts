/**
 * envoyproxy/ratelimit's per-limit stats as Prometheus counters, with the names and labels its
 * Prometheus sink exports (src/stats/prom/default_mapper.yaml), so its dashboards and alerts keep
 * working:
 *
 * `ratelimit_service_rate_limit_{total_hits,within_limit,near_limit,over_limit,shadow_mode}`
 * with `domain` and `key1` for a stat key of two parts (`api.user` -> domain `api`, key1
 * `user`), and `key2` too for deeper ones (`api.path_/x.user`: deeper parts are dropped, as
 * its mapper drops them).
 *
 * Counted as its base limiter counts (src/limiter/base_limiter.go), in units of hits
 * (`hits_addend`): `total_hits` every unit; `within_limit` the units of an admitted hit;
 * `near_limit` the units above `floor(limit x NEAR_LIMIT_RATIO)` (0.8 by default) and up to the
 * limit; `over_limit` the units above the limit; `shadow_mode` the units above the limit of a
 * shadow rule (answered OK). A hit crossing a threshold is split at it.
 *
 * Also its `ratelimit_service_config_load_success` and `ratelimit_service_config_load_error`:
 * rules loaded (at start and on each reload) and reloads refused;
 * `ratelimit_service_should_rate_limit_error{err_type}`: RLS calls refused, `service_error` (a
 * request it cannot decide, or an internal error) or `redis_error` (the store failed); and
 * `ratelimit_service_global_shadow_mode`: answers over a limit turned OK by `SHADOW_MODE`.
 *
 * Cardinality: a rule's stat key comes from the rules. Keys carrying the request's values
 * (`detailed_metric` rules, `value_to_metric` nodes, descriptors with their own limit) are kept for the first
 * `maxValuedKeys` distinct keys; hits of any further one are counted under
 * `{domain="<domain>", key1="(overflow)"}` (domain `(unknown)` when no rule names it).
 */
import { Counter, type Registry } from "prom-client";
import type { LimitStatKey } from "./service/types.js";

/** Options of {@link EnvoyStats}. */
export interface EnvoyStatsOptions {
  /** envoyproxy/ratelimit's `NEAR_LIMIT_RATIO`: hits above this share of the limit are near it. @default 0.8 */
  nearLimitRatio?: number | undefined;
  /** The most stat keys carrying request values kept (then `(overflow)`). @default 1000 */
  maxValuedKeys?: number | undefined;
}

type Labels = Partial<Record<"domain" | "key1" | "key2", string>>;

/** One stat key's counts since the last scrape, its labels, the stats it is listed under (bits). */
interface Counts {
  readonly labels: Labels;
  total_hits: number;
  within_limit: number;
  near_limit: number;
  over_limit: number;
  shadow_mode: number;
  seen: number;
}

const STATS = ["total_hits", "within_limit", "near_limit", "over_limit", "shadow_mode"] as const;
// Bits of `Counts.seen`, in the order of STATS.
const TOTAL = 1;
const WITHIN = 2;
const NEAR = 4;
const OVER = 8;
const SHADOW = 16;
const HELP: Record<(typeof STATS)[number], string> = {
  total_hits: "Hits (hits_addend units) checked against the limit (envoyproxy/ratelimit's stat).",
  within_limit: "Hits within the limit (envoyproxy/ratelimit's stat).",
  near_limit: "Hits above NEAR_LIMIT_RATIO of the limit and within it (envoyproxy/ratelimit's stat).",
  over_limit: "Hits over the limit (envoyproxy/ratelimit's stat).",
  shadow_mode: "Hits over the limit of a shadow_mode rule, answered OK (envoyproxy/ratelimit's stat).",
};

/**
 * Counts hits in numbers of its own on the hot path (the last stat key's counts compared before
 * the Map lookup) and flushes them into prom-client at scrape time, each stat's series in the
 * order each was first counted, as prom-client told every hit would list them.
 * @example const s = new EnvoyStats(registry); s.hit({ key: "api.user", domain: "api", valued: false, shadow: false }, 5, 0, 1);
 */
export class EnvoyStats {
  private readonly pending = new Map<string, Counts>();
  private readonly overflow = new Map<string, Counts>();
  private readonly nearRatio: number;
  private readonly maxValuedKeys: number;
  private valuedKeys = 0;
  /** Per stat (index in STATS), the counts with a hit of that stat, in the order first counted. */
  private readonly listed: Counts[][] = STATS.map(() => []);
  private lastKey: string | undefined;
  private lastCounts: Counts | undefined;
  private readonly loads: Record<"success" | "error", Counter>;
  private readonly callErrors: Counter<"err_type">;
  private readonly shadowed: Counter;

  constructor(registry: Registry, options: EnvoyStatsOptions = {}) {
    this.nearRatio = Math.fround(options.nearLimitRatio ?? 0.8);
    this.maxValuedKeys = options.maxValuedKeys ?? 1000;
    STATS.forEach((stat, i) => {
      const listed = this.listed[i] as Counts[];
      const counter = new Counter({
        name: `ratelimit_service_rate_limit_${stat}`,
        help: HELP[stat],
        labelNames: ["domain", "key1", "key2"],
        registers: [registry],
        collect() {
          for (const c of listed) {
            // Below 0 (hits refunded after they were handed over): kept, taken from the next ones.
            if (c[stat] > 0) {
              this.inc(c.labels, c[stat]);
              c[stat] = 0;
            }
          }
        },
      });
      // `registry.resetMetrics()`: the counts not handed over go too, each listed again when hit.
      const reset = counter.reset.bind(counter);
      counter.reset = () => {
        for (const c of listed) {
          c[stat] = 0;
          c.seen &= ~(1 << i);
        }
        listed.length = 0;
        reset();
      };
    });
    const load = (what: "success" | "error", help: string) =>
      new Counter({ name: `ratelimit_service_config_load_${what}`, help, registers: [registry] });
    this.loads = {
      success: load("success", "Rules loaded, at start and on each reload (envoyproxy/ratelimit's stat)."),
      error: load("error", "Rules reloads refused: the last good rules stay (envoyproxy/ratelimit's stat)."),
    };
    this.callErrors = new Counter({
      name: "ratelimit_service_should_rate_limit_error",
      help: "RLS calls refused: service_error (a request it cannot decide, or an internal error), redis_error (the store failed) (envoyproxy/ratelimit's stat).",
      labelNames: ["err_type"],
      registers: [registry],
    });
    this.shadowed = new Counter({
      name: "ratelimit_service_global_shadow_mode",
      help: "Answers over a limit turned OK by the global shadow mode (envoyproxy/ratelimit's stat).",
      registers: [registry],
    });
  }

  /** An RLS call refused: a request it cannot decide, or the store failed. */
  callError(kind: "service_error" | "redis_error"): void {
    this.callErrors.inc({ err_type: kind });
  }

  /** An answer over a limit turned OK by the global shadow mode. */
  globalShadow(): void {
    this.shadowed.inc();
  }

  /** Rules were loaded (`ok`: at start or on a reload) or a reload was refused. */
  configLoad(ok: boolean): void {
    this.loads[ok ? "success" : "error"].inc();
  }

  /** One descriptor charged `cost` units, `usedBefore` of `limit` being used before (over when the sum passes the limit). */
  hit(stat: LimitStatKey, limit: number, usedBefore: number, cost: number): void {
    // Consecutive hits mostly share their rule's stat key: compared before the Map lookup (only
    // a key kept under its own labels; one counted under `(overflow)` is looked up as before).
    let c = this.lastCounts;
    if (c === undefined || stat.key !== this.lastKey) {
      c = this.pending.get(stat.key);
      if (c !== undefined) {
        this.lastKey = stat.key;
        this.lastCounts = c;
      } else c = this.countsFor(stat);
    }
    const hits = this.add(c, stat.shadow, limit, usedBefore, cost, 1);
    if ((hits & ~c.seen) !== 0) this.list(c, hits);
  }

  /**
   * A {@link hit} (the same arguments) whose charge was given back, its check answered with an
   * error: taken back from the counts. One handed over at a scrape already is taken from the next
   * ones (a count below 0 is kept, never handed over: a counter never goes down). Nothing when
   * its counts were forgotten since (`registry.resetMetrics()`).
   */
  refunded(stat: LimitStatKey, limit: number, usedBefore: number, cost: number): void {
    const c = this.pending.get(stat.key) ?? (stat.valued ? this.overflow.get(stat.domain) : undefined);
    if (c !== undefined && (c.seen & TOTAL) !== 0) this.add(c, stat.shadow, limit, usedBefore, cost, -1);
  }

  /**
   * Adds `sign` x the units of a hit to `c`, split as its base limiter splits them; returns the
   * stats it has units of (bits).
   */
  private add(c: Counts, shadowRule: boolean, limit: number, usedBefore: number, cost: number, sign: 1 | -1): number {
    const after = usedBefore + cost;
    // As its base limiter: float32 arithmetic, rounded down.
    const near = Math.floor(Math.fround(Math.fround(limit) * this.nearRatio));
    let within = 0;
    let nearly = 0;
    let over = 0;
    let shadow = 0;
    if (after > limit) {
      over = usedBefore >= limit ? cost : after - limit;
      if (usedBefore < limit) nearly = limit - Math.max(near, usedBefore);
      if (shadowRule) shadow = over;
    } else {
      if (after > near) nearly = usedBefore >= near ? cost : after - near;
      within = cost;
    }
    c.total_hits += sign * cost;
    c.within_limit += sign * within;
    c.near_limit += sign * nearly;
    c.over_limit += sign * over;
    c.shadow_mode += sign * shadow;
    return (cost > 0 ? TOTAL : 0) | (within > 0 ? WITHIN : 0) | (nearly > 0 ? NEAR : 0) | (over > 0 ? OVER : 0) | (shadow > 0 ? SHADOW : 0);
  }

  /** Lists `c` under each stat it has its first hit of (`hits`: the stats of this hit). */
  private list(c: Counts, hits: number): void {
    for (let i = 0; i < STATS.length; i++) {
      const bit = 1 << i;
      if ((hits & bit) !== 0 && (c.seen & bit) === 0) this.listed[i]?.push(c);
    }
    c.seen |= hits;
  }

  /** A new key's counts; past the cap, a valued key's hits go to its domain's overflow counts (not kept by key). */
  private countsFor(stat: LimitStatKey): Counts {
    if (stat.valued && this.valuedKeys >= this.maxValuedKeys) {
      let o = this.overflow.get(stat.domain);
      if (o === undefined) this.overflow.set(stat.domain, (o = newCounts({ domain: stat.domain, key1: "(overflow)" })));
      return o;
    }
    if (stat.valued) this.valuedKeys++;
    // Its mapper: `domain.key1` by one rule, `domain.key1.key2(.more)` by another.
    const parts = stat.key.split(".");
    const labels: Labels = { domain: parts[0] ?? "", key1: parts[1] ?? "" };
    if (parts.length > 2) labels.key2 = parts[2] ?? "";
    const c = newCounts(labels);
    this.pending.set(stat.key, c);
    return c;
  }
}

function newCounts(labels: Labels): Counts {
  return { labels, total_hits: 0, within_limit: 0, near_limit: 0, over_limit: 0, shadow_mode: 0, seen: 0 };
}
