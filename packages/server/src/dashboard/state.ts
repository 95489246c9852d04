import type { ResolvedLimit } from "ratekeeper";
import type { Rules } from "../config/rules.js";
import type { OverrideStore, StoredOverride } from "../overrides/types.js";
import { splitStateKey } from "../service/descriptor-key.js";
import { StoreFailure } from "../service/types.js";
import type { Logger } from "../log.js";
import { TOP_KEYS_CAPACITY, type DashboardStats, type RuleCounters } from "./stats.js";

/**
 * The dashboard's JSON (`GET /dashboard/api/state`, and each `state` event of
 * `/dashboard/api/events`): one object, documented in docs/dashboard.md for scripts.
 */
export interface DashboardState {
  /** Bumped on an incompatible change of this shape. */
  readonly version: 1;
  readonly nowMs: number;
  readonly startedAtMs: number;
  readonly rulesSource: string;
  /** Every decision since start, and in the last full second. */
  readonly totals: { allowed: number; denied: number; allowedLastSecond: number; deniedLastSecond: number };
  readonly domains: readonly DomainState[];
  readonly topDenied: {
    /** Denials counted by the sketch since start. */
    readonly total: number;
    /** Each count is at most this much above the truth (total / capacity), while nothing was sampled. */
    readonly maxError: number;
    /**
     * Denials counted with a weight because they came faster than the sketch counts one by one
     * (a flood): when not 0, counts are estimates.
     */
    readonly sampledDenials: number;
    readonly keys: readonly { domain: string; key: string; rule: string | null; denials: number; error: number }[];
  };
  readonly overrides: {
    /** Whether the service has an overrides store (`--overrides`). */
    readonly enabled: boolean;
    /** Live overrides listed (at most {@link MAX_OVERRIDES_LISTED}; `more` says whether there are others). */
    readonly items: readonly { domain: string; key: string; policy: string; expiresAtMs: number | null; note: string | null }[];
    readonly more: boolean;
    readonly error: string | null;
  };
  readonly store: StoreHealth & {
    /** Latency of recent store calls as the service measured them (ms). */
    readonly latencyMs: { p50: number; p99: number; max: number; samples: number } | null;
    readonly errors: number;
    /** Decisions made by the store's failure policy (Redis down or slow). */
    readonly failurePolicyDecisions: number;
  };
}

/** One domain: its rules with their counts, in file order; counts for rules no longer (or never) in the file follow. */
export interface DomainState {
  readonly domain: string;
  readonly rules: readonly RuleState[];
}

export interface RuleState {
  /** The rule id, `policy:<name>` for plain-key checks, or `""` for checks no rule matched. */
  readonly id: string;
  /** The policy, e.g. `sliding-window 100 per 1m`; `unlimited`; or null when not from the rules file. */
  readonly limits: string | null;
  readonly shadow: boolean;
  /** Whether the rule is in the rules file in force. */
  readonly configured: boolean;
  readonly allowed: number;
  readonly denied: number;
  readonly shadowDenied: number;
  /** Per second, oldest first, the last 60 seconds. */
  readonly allowedPerSecond: readonly number[];
  readonly deniedPerSecond: readonly number[];
}

/** What the store says about itself: its kind, its connection, its circuit breaker when it has one. */
export interface StoreHealth {
  readonly kind: string;
  /** `ready`, or the Redis connection's state (`connecting`, `reconnecting`, `end`, ...). */
  readonly status: string;
  /** `closed`, `open` or `half-open` when the store has a circuit breaker; null otherwise. */
  readonly breaker: string | null;
}

export const MAX_OVERRIDES_LISTED = 100;
/** Overrides are listed from the store at most this often (the hot path never reads the store). */
const OVERRIDES_TTL_MS = 5_000;

/**
 * A state that took this long to build (and to turn into JSON) is served again for this many
 * times as long, up to {@link MAX_STATE_REUSE_MS}: building it then takes at most ~5% of a core
 * however often it is asked for. A cheap state (most rules files) is built fresh every time.
 */
const STATE_REUSE_FACTOR = 20;
const MAX_STATE_REUSE_MS = 1000;

/** What {@link StateBuilder} reads. */
export interface StateSources {
  readonly stats: DashboardStats;
  readonly rules: () => Rules;
  readonly overrides?: OverrideStore | undefined;
  readonly storeHealth: () => StoreHealth;
  /** Where a failed overrides listing is logged, with the error id `overrides.error` gives. */
  readonly logger?: Pick<Logger, "warn"> | undefined;
  /** Milliseconds: `nowMs`, and (when given) the timing of builds too. Default Date.now. */
  readonly clock?: (() => number) | undefined;
}

/** Builds {@link DashboardState}; caches the overrides listing for a few seconds. */
export class StateBuilder {
  private overridesAt = -Infinity;
  private overridesCache: DashboardState["overrides"] | undefined;
  /** The build in progress, shared by everyone who asks meanwhile. */
  private building: Promise<string> | undefined;
  /** The last state's JSON, and until when (build clock) it is served again. */
  private lastJson = "";
  private reuseUntil = -Infinity;

  constructor(private readonly src: StateSources) {}

  /**
   * The state as JSON, for `/dashboard/api/state` and the event streams. With a large rules
   * file it is megabytes (every rule's 60 s of history) and the dashboard may be open to anyone:
   * concurrent callers share one build, and an expensive state is reused for a while
   * ({@link STATE_REUSE_FACTOR}) rather than rebuilt per request.
   */
  json(): Promise<string> {
    const elapsed = this.src.clock ?? performance.now.bind(performance);
    if (elapsed() < this.reuseUntil) return Promise.resolve(this.lastJson);
    return (this.building ??= (async () => {
      try {
        const started = elapsed();
        const json = JSON.stringify(await this.build());
        const ended = elapsed();
        this.lastJson = json;
        this.reuseUntil = ended + Math.min(MAX_STATE_REUSE_MS, STATE_REUSE_FACTOR * (ended - started));
        return json;
      } finally {
        this.building = undefined;
      }
    })());
  }

  async build(): Promise<DashboardState> {
    const { stats } = this.src;
    const now = (this.src.clock ?? Date.now)();
    const rules = this.src.rules();
    const counters = stats.rules();
    let allowedLast = 0;
    let deniedLast = 0;
    let allowed = 0;
    let denied = 0;
    for (const c of counters) {
      allowed += c.allowed;
      denied += c.denied;
      allowedLast += c.allowedPerSecond[c.allowedPerSecond.length - 1] as number;
      deniedLast += c.deniedPerSecond[c.deniedPerSecond.length - 1] as number;
    }
    const top = stats.topDenied;
    return {
      version: 1,
      nowMs: now,
      startedAtMs: stats.startedAtMs,
      rulesSource: rules.source,
      totals: { allowed, denied, allowedLastSecond: allowedLast, deniedLastSecond: deniedLast },
      domains: domainsOf(rules, counters),
      topDenied: {
        total: top.total,
        maxError: Math.floor(top.total / TOP_KEYS_CAPACITY),
        sampledDenials: stats.sampledDenials,
        keys: top.top(20).map((t) => {
          const { domain, key } = splitStateKey(t.item);
          return { domain, key, rule: t.payload ?? null, denials: t.count, error: t.error };
        }),
      },
      overrides: await this.overrides(now),
      store: {
        ...this.src.storeHealth(),
        latencyMs: stats.latencyMs(),
        errors: stats.storeErrors,
        failurePolicyDecisions: stats.failurePolicyDecisions,
      },
    };
  }

  private async overrides(now: number): Promise<DashboardState["overrides"]> {
    const store = this.src.overrides;
    if (!store) return { enabled: false, items: [], more: false, error: null };
    if (this.overridesCache && now - this.overridesAt < OVERRIDES_TTL_MS) return this.overridesCache;
    try {
      const page = await store.list({ liveAtMs: now, limit: MAX_OVERRIDES_LISTED });
      this.overridesCache = { enabled: true, items: page.items.map(overrideRow), more: page.nextCursor !== undefined, error: null };
    } catch (e) {
      // Never the error's text: the dashboard may be open to more people than the database's address and users.
      const failure = new StoreFailure("overrides database", e, store);
      this.src.logger?.warn({ err: failure, errorId: failure.errorId }, "dashboard: the overrides listing failed");
      this.overridesCache = { enabled: true, items: [], more: false, error: failure.message };
    }
    this.overridesAt = now;
    return this.overridesCache;
  }
}

function overrideRow(o: StoredOverride) {
  const policy = typeof o.policy === "string" ? o.policy : storedLimits(o.policy.limits);
  return { domain: o.domain, key: o.key, policy, expiresAtMs: o.expiresAtMs ?? null, note: o.note ?? null };
}

/**
 * An override's limits as the listing shows them. A row edited by hand may hold what is no list
 * of limits (overrides/schema.ts storedLimits: the text itself, or JSON of another shape): shown
 * as stored, not thrown, which failed the whole listing as the overrides database's failure.
 */
function storedLimits(limits: unknown): string {
  if (Array.isArray(limits) && limits.every((l) => typeof l === "object" && l !== null))
    return (limits as { algorithm: unknown; limit: unknown; window: unknown }[])
      .map((l) => `${String(l.algorithm)} ${String(l.limit)} per ${String(l.window)}`)
      .join(" + ");
  return `not a policy: ${typeof limits === "string" ? limits : String(JSON.stringify(limits))}`;
}

function describeLimits(limits: readonly ResolvedLimit[]): string {
  return limits.map((l) => `${l.algorithm} ${l.limit} per ${formatWindow(l.windowMs)}`).join(" + ");
}

function formatWindow(ms: number): string {
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const)
    if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/** The rules file's domains and rules in file order, each with its counters; counters of rules not in the file (any more) after them. */
function domainsOf(rules: Rules, counters: readonly RuleCounters[]): DomainState[] {
  const byId = new Map<string, RuleCounters>();
  for (const c of counters) byId.set(`${c.domain}\u0000${c.rule}`, c);
  const domains = new Map<string, RuleState[]>();
  const add = (domain: string, row: RuleState) => {
    let list = domains.get(domain);
    if (!list) domains.set(domain, (list = []));
    list.push(row);
  };
  for (const d of rules.domains.keys()) domains.set(d, []);
  for (const r of rules.rules) {
    const c = byId.get(`${r.domain}\u0000${r.id}`);
    byId.delete(`${r.domain}\u0000${r.id}`);
    add(r.domain, row(r.id, r.unlimited ? "unlimited" : describeLimits(r.limits), r.shadow, true, c));
  }
  for (const p of rules.policies.values()) {
    const c = byId.get(`(policy)\u0000policy:${p.name}`);
    byId.delete(`(policy)\u0000policy:${p.name}`);
    add("(policy)", row(`policy:${p.name}`, describeLimits(p.limits), p.shadow, true, c));
  }
  for (const c of byId.values()) add(c.domain, row(c.rule, null, false, false, c));
  return [...domains].map(([domain, list]) => ({ domain, rules: list }));
}

function row(id: string, limits: string | null, shadow: boolean, configured: boolean, c: RuleCounters | undefined): RuleState {
  return {
    id,
    limits,
    shadow,
    configured,
    allowed: c?.allowed ?? 0,
    denied: c?.denied ?? 0,
    shadowDenied: c?.shadowDenied ?? 0,
    allowedPerSecond: c ? Array.from(c.allowedPerSecond) : ZEROS,
    deniedPerSecond: c ? Array.from(c.deniedPerSecond) : ZEROS,
  };
}

const ZEROS: readonly number[] = new Array<number>(60).fill(0);
