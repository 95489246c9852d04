import type { DecisionObserver, LimitStatKey } from "../service/types.js";
import { SpaceSaving } from "./space-saving.js";

/** Seconds of per-second history kept per rule. */
export const HISTORY_SECONDS = 60;
/** Keys monitored for "top keys by denials": the sketch's error is at most (denials / this). */
export const TOP_KEYS_CAPACITY = 128;
/** Store call latencies kept for the percentiles (the most recent ones). */
const LATENCY_SAMPLES = 1024;
/**
 * Up to this many denials a second, every denial is counted in the top-keys sketch (exactly
 * within its bound). Past it (a flood), one denial in {@link SAMPLE_EVERY}, picked at random, is
 * counted with that weight: a heavy hitter still stands out (its count is then an estimate),
 * and the sketch costs a few nanoseconds per denial instead of a few hundred for a new key.
 */
export const COUNT_ALL_BELOW_PER_SECOND = 1000;
export const SAMPLE_EVERY = 16;

/** Decision counts of one rule (or of the unmatched checks of one domain), with per-second history. */
export interface RuleCounters {
  readonly domain: string;
  readonly rule: string;
  /** Totals since the service started. */
  allowed: number;
  denied: number;
  /** Shadow-mode rules: checks the rule would have denied (they were allowed). */
  shadowDenied: number;
  /** Per-second counts, oldest first, the last {@link HISTORY_SECONDS} seconds (written by the ticker). */
  readonly allowedPerSecond: Float64Array;
  readonly deniedPerSecond: Float64Array;
  /** Totals at the previous tick. */
  lastAllowed: number;
  lastDenied: number;
}

/**
 * What the dashboard counts, as a {@link DecisionObserver}: decisions per rule (allowed, denied,
 * shadow), the keys denied most (a bounded Space-Saving sketch: never a map of every key;
 * sampled during floods of denials, see {@link COUNT_ALL_BELOW_PER_SECOND}), and the latency
 * of recent store calls. The hot path only increments numbers in objects it already
 * holds (two Map lookups per decision, as the Prometheus metrics do); per-second rates are
 * sampled by a one-second timer that only runs while the service does.
 */
export class DashboardStats implements DecisionObserver {
  /** domain -> rule -> counters. */
  private readonly counters = new Map<string, Map<string, RuleCounters>>();
  /** Denied state key (`domain|key`) -> count (the payload is the rule that denied it last). */
  readonly topDenied = new SpaceSaving<string>(TOP_KEYS_CAPACITY);
  private readonly latencies = new Float64Array(LATENCY_SAMPLES);
  private latencyCount = 0;
  storeErrors = 0;
  failurePolicyDecisions = 0;
  /** Denials since the last tick (decides whether the sketch samples). */
  private deniedThisSecond = 0;
  /** Denials counted with a weight (sampled) since start. */
  sampledDenials = 0;
  /** xorshift32 state, for picking denials when sampling. */
  private rnd = 0x9e3779b9;
  readonly startedAtMs: number;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners = new Set<() => void>();

  constructor(nowMs = Date.now()) {
    this.startedAtMs = nowMs;
  }

  decision(domain: string, rule: string, outcome: Parameters<DecisionObserver["decision"]>[2], key?: string): void {
    // Consecutive decisions mostly hit the same rule: compare with the last one before hashing.
    let c = this.last;
    if (c === undefined || c.rule !== rule || c.domain !== domain) c = this.last = this.countersOf(domain, rule);
    switch (outcome) {
      case "over_limit":
      case "blocked":
        c.denied++;
        if (key !== undefined) this.countDenied(key, rule);
        return;
      case "shadow_over_limit":
        c.shadowDenied++;
        c.allowed++;
        return;
      case "ok":
      case "unlimited":
      case "no_match":
      case "replaced":
        c.allowed++;
        return;
    }
  }

  /**
   * A decision counted allowed was given back (its check or batch answered with an error): taken
   * from the rule's total, and from this second's count; one counted in a second already sampled
   * stays in that second (a rate never goes below 0).
   */
  refunded(domain: string, rule: string): void {
    const c = this.counters.get(domain)?.get(rule);
    if (c === undefined || c.allowed === 0) return;
    c.allowed--;
    if (c.lastAllowed > c.allowed) c.lastAllowed = c.allowed;
  }

  private last: RuleCounters | undefined;

  private countersOf(domain: string, rule: string): RuleCounters {
    let rules = this.counters.get(domain);
    if (rules === undefined) this.counters.set(domain, (rules = new Map<string, RuleCounters>()));
    let c = rules.get(rule);
    if (c === undefined) rules.set(rule, (c = newCounters(domain, rule)));
    return c;
  }

  private countDenied(key: string, rule: string): void {
    if (++this.deniedThisSecond <= COUNT_ALL_BELOW_PER_SECOND) return this.topDenied.offer(key, 1, rule);
    let x = this.rnd;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.rnd = x;
    if ((x & (SAMPLE_EVERY - 1)) !== 0) return;
    this.sampledDenials++;
    this.topDenied.offer(key, SAMPLE_EVERY, rule);
  }

  storeLatency(seconds: number): void {
    this.latencies[this.latencyCount++ & (LATENCY_SAMPLES - 1)] = seconds;
  }

  storeError(kind: "error" | "failure_policy"): void {
    if (kind === "error") this.storeErrors++;
    else this.failurePolicyDecisions++;
  }

  /** Every rule's counters (and each domain's unmatched checks, with rule ""). */
  rules(): RuleCounters[] {
    const out: RuleCounters[] = [];
    for (const rules of this.counters.values()) for (const c of rules.values()) out.push(c);
    return out;
  }

  /**
   * Store call latency percentiles over the recent calls, in ms (null before the first call).
   * With the in-memory store, about one call in 64 is timed and the service's tee gives the
   * others the last timed latency (as the metrics count them): the last 1024 calls then hold
   * about 16 measured latencies.
   */
  latencyMs(): { p50: number; p99: number; max: number; samples: number } | null {
    const n = Math.min(this.latencyCount, LATENCY_SAMPLES);
    if (n === 0) return null;
    const sorted = this.latencies.slice(0, n).sort();
    const at = (q: number) => Math.round((sorted[Math.min(n - 1, Math.floor(q * n))] as number) * 1e6) / 1e3;
    return { p50: at(0.5), p99: at(0.99), max: at(1), samples: n };
  }

  /** Moves every rule's per-second history on by one second; then tells the listeners. */
  tick(): void {
    this.deniedThisSecond = 0;
    for (const c of this.rules()) {
      shiftIn(c.allowedPerSecond, c.allowed - c.lastAllowed);
      shiftIn(c.deniedPerSecond, c.denied - c.lastDenied);
      c.lastAllowed = c.allowed;
      c.lastDenied = c.denied;
    }
    for (const l of this.listeners) l();
  }

  /** Calls `listener` after every tick (about once a second). @returns a function that unsubscribes */
  onTick(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Starts the one-second ticker (unref'd: it never keeps the process alive). Idempotent. */
  start(intervalMs = 1000): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.listeners.clear();
  }
}

function newCounters(domain: string, rule: string): RuleCounters {
  return {
    domain,
    rule,
    allowed: 0,
    denied: 0,
    shadowDenied: 0,
    allowedPerSecond: new Float64Array(HISTORY_SECONDS),
    deniedPerSecond: new Float64Array(HISTORY_SECONDS),
    lastAllowed: 0,
    lastDenied: 0,
  };
}

function shiftIn(ring: Float64Array, v: number): void {
  ring.copyWithin(0, 1);
  ring[ring.length - 1] = v;
}

/**
 * One observer that tells two: the Prometheus metrics and the dashboard. A class (not a
 * closure) so the hot path's calls stay monomorphic.
 */
export class TeeObserver implements DecisionObserver {
  constructor(
    private readonly a: DecisionObserver,
    private readonly b: DecisionObserver,
  ) {}
  decision(domain: string, rule: string, outcome: Parameters<DecisionObserver["decision"]>[2], key?: string): void {
    this.a.decision(domain, rule, outcome, key);
    this.b.decision(domain, rule, outcome, key);
  }
  refunded(domain: string, rule: string): void {
    this.a.refunded?.(domain, rule);
    this.b.refunded?.(domain, rule);
  }
  storeLatency(seconds: number): void {
    this.lastLatency = seconds;
    this.a.storeLatency(seconds);
    this.b.storeLatency(seconds);
  }

  private lastLatency: number | undefined;

  /** An untimed store call: an observer without `storeLatencyAgain` gets the last latency again. */
  storeLatencyAgain(): void {
    if (this.a.storeLatencyAgain) this.a.storeLatencyAgain();
    else if (this.lastLatency !== undefined) this.a.storeLatency(this.lastLatency);
    if (this.b.storeLatencyAgain) this.b.storeLatencyAgain();
    else if (this.lastLatency !== undefined) this.b.storeLatency(this.lastLatency);
  }
  storeError(kind: "error" | "failure_policy"): void {
    this.a.storeError(kind);
    this.b.storeError(kind);
  }

  decisionReason(reason: string): void {
    this.a.decisionReason?.(reason);
    this.b.decisionReason?.(reason);
  }

  limitHit(stat: LimitStatKey, limit: number, usedBefore: number, cost: number): void {
    this.a.limitHit?.(stat, limit, usedBefore, cost);
    this.b.limitHit?.(stat, limit, usedBefore, cost);
  }
  limitRefunded(stat: LimitStatKey, limit: number, usedBefore: number, cost: number): void {
    this.a.limitRefunded?.(stat, limit, usedBefore, cost);
    this.b.limitRefunded?.(stat, limit, usedBefore, cost);
  }
}
