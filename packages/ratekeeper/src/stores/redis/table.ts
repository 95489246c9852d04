import type { Decision, Outcome } from "../../core/decision.js";
import { describeValue, RateLimitStoreError } from "../../core/errors.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BoundStore } from "../../store.js";
import { Batcher, type Pending } from "./batcher.js";
import { DegradedLimiter } from "./degraded.js";
import { DenialCache } from "./denial-cache.js";
import { counterFits } from "./counter.js";
import { fastOutcome, FAST_ALGORITHMS } from "./fast-reply.js";
import { RedisDownError, RedisTimeoutError, type Lane } from "./lanes.js";
import { loadScript, SECTIONS_OF, type LoadedScript } from "./scripts.js";
import { ScriptFormat } from "./script-format.js";
import { decideByPolicy, withoutRedis, type DecisionCall } from "./without-redis.js";
import type { RedisStore } from "./store.js";

/** What a denial by the `"closed"` policy, or by backpressure, says to retry after. */
/** Reconciliation calls in flight at once, per limiter. */
const RECONCILE_CONCURRENCY = 64;

/** One limiter's view of a {@link RedisStore}: its script, key layout, batching, denial cache and failure policy. */
export class RedisTable implements BoundStore {
  /** Keys, ARGV header and reply reading, shared with the HTTP Redis store. */
  private readonly format: ScriptFormat;
  private readonly single: boolean;
  private readonly n: number;
  private readonly minCapacity: number;
  /** Batching (option `batch`): one Batcher per lane, i.e. per hash slot on a cluster, since a script call may touch one slot only. */
  private readonly batchers: Map<Lane, Batcher> | undefined;
  private readonly denials: DenialCache | undefined;
  private insurance: BoundStore | undefined;
  private degraded: DegradedLimiter | undefined;
  /** The script built with exactly the algorithms of these limits. */
  readonly script: LoadedScript;
  /** Whether lone decisions take the script's fast path (ratekeeper.lua, modes "C"/"P"). */
  private readonly fast: boolean;
  /** The fast path's ARGV[4..8]: limit, windowMs, kind (f / n / F / b / s), capacity, minTtlMs. */
  private readonly fastTail: string[];
  /**
   * Whether a limit shapes (leaky bucket `mode: "shape"`): then each consume carries the caller's
   * longest wait (`maxDelayMs`) to the script, one more ARGV per decision. Otherwise the bound
   * cannot matter and is dropped here.
   */
  private readonly shapes: boolean;

  constructor(
    private readonly store: RedisStore,
    private readonly limits: readonly ResolvedLimit[],
    private readonly namespace: string,
  ) {
    const o = store.opts;
    this.format = new ScriptFormat(limits, o.prefix, namespace, o.minTtlMs);
    this.single = limits.length === 1;
    this.n = limits.length;
    this.minCapacity = Math.min(...limits.map((l) => l.capacity));
    // One limit with a two-number state, on a client that can return raw bytes: the script's fast path.
    const l0 = limits[0] as ResolvedLimit;
    this.fast = this.single && FAST_ALGORITHMS.has(l0.algorithm) && o.shim.evalshaBuffer !== undefined;
    this.script = loadScript("ratekeeper", [...limits.flatMap((l) => SECTIONS_OF[l.algorithm] ?? []), ...(this.fast ? ["fast-pair"] : [])]);
    this.shapes = limits.some((l) => l.shape);
    const kind = l0.algorithm !== "fixed-window" ? (l0.shape ? "s" : "b") : l0.alignFirst ? "F" : counterFits(l0, o.minTtlMs) ? "n" : "f";
    this.fastTail = [String(l0.limit), String(l0.windowMs), kind, String(l0.capacity), String(o.minTtlMs)];
    this.denials = o.denialMaxKeys > 0 ? new DenialCache(o.denialMaxKeys) : undefined;
    if (o.maxBatch > 0) this.batchers = new Map();
  }

  /** The batcher of the lane `key`'s keys go to (made on first use; lanes live as long as the store). */
  private batcherOf(key: string): Batcher {
    // One lane on a single Redis: no need to build the key to find it.
    const lane = this.store.lanes.of(this.store.opts.shim.isCluster ? (this.keysOf(key)[0] as string) : "");
    const batchers = this.batchers as Map<Lane, Batcher>;
    let b = batchers.get(lane);
    if (b === undefined) {
      const max = this.store.opts.maxBatch;
      b = new Batcher(
        max,
        (batch) => this.send(batch),
        () => lane.breaker.state !== "closed",
        () => new RedisDownError(),
      );
      batchers.set(lane, b);
    }
    return b;
  }

  /** Units admitted while degraded that the ledger could not hold. */
  get unrecorded(): number {
    return this.degraded?.unrecorded ?? 0;
  }

  /** The Redis keys of `key`, one per limit, all with the hash tag `{<namespace>:<key>}`. */
  keysOf(key: string): string[] {
    return this.format.keysOf(key);
  }

  consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Promise<Decision> {
    const bound = this.shapes ? maxDelayMs : undefined;
    const hit = this.denials?.get(key, cost, nowMs ?? Date.now(), bound);
    if (hit !== undefined) return Promise.resolve(hit);
    return this.decide({ op: "consume", key, cost, nowMs, maxDelayMs: bound });
  }

  peek(key: string, cost: number, nowMs: number | undefined): Promise<Decision> {
    const hit = this.denials?.get(key, cost, nowMs ?? Date.now());
    if (hit !== undefined) return Promise.resolve(hit);
    return this.decide({ op: "peek", key, cost, nowMs, maxDelayMs: undefined });
  }

  async refund(key: string, cost: number, nowMs: number | undefined): Promise<void> {
    this.denials?.delete(key);
    try {
      await this.call("r", key, cost, nowMs);
    } catch (e) {
      await this.failedWrite(e, "refund", key, () => this.fallbackStore()?.refund(key, cost, nowMs));
    }
  }

  async reset(key: string): Promise<void> {
    this.denials?.delete(key);
    try {
      await this.call("x", key, 1, undefined);
    } catch (e) {
      await this.failedWrite(e, "reset", key, () => this.fallbackStore()?.reset(key));
    }
    // The local stores may hold state from an outage: forget it too.
    await this.insurance?.reset(key);
    await this.degraded?.reset(key);
  }

  /**
   * Charges Redis with what this limiter admitted on its own while `lane` was down (the
   * `"degraded"` policy), key by key: the units admitted, or as many as the key has room for.
   */
  async reconcile(lane: Lane): Promise<void> {
    const d = this.degraded;
    if (d === undefined) return;
    const entries = await d.drain((key) => this.store.lanes.of(this.keysOf(key)[0] as string) === lane);
    for (let i = 0; i < entries.length; i += RECONCILE_CONCURRENCY) {
      await Promise.all(entries.slice(i, i + RECONCILE_CONCURRENCY).map(([key, units]) => this.charge(key, units)));
    }
    if (!d.pending) this.store.ledgerEmpty(this);
  }

  private async charge(key: string, units: number): Promise<void> {
    try {
      const first = this.toDecision(await this.call("c", key, Math.min(units, this.minCapacity), undefined), units);
      if (!first.allowed && first.remaining > 0) await this.call("c", key, first.remaining, undefined);
    } catch (e) {
      this.degraded?.record(key, units);
      this.store.report(e, { op: "reconcile", key, timedOut: e instanceof RedisTimeoutError });
      this.store.reconcileSoon(this.store.lanes.of(this.keysOf(key)[0] as string));
    }
  }

  private async decide(call: DecisionCall): Promise<Decision> {
    const { op, key, cost, nowMs, maxDelayMs } = call;
    const mode = op === "consume" ? "c" : "p";
    this.store.checkConnection();
    if (!this.store.enter()) return withoutRedis(this.limits, "overloaded", false);
    let outcome: readonly unknown[];
    try {
      outcome = await this.call(mode, key, cost, nowMs, maxDelayMs);
    } catch (e) {
      return this.failed(e, call);
    } finally {
      this.store.leave();
    }
    const d = this.toDecision(outcome, cost);
    if (mode === "c" && !d.allowed && this.denials !== undefined) this.denials.remember(key, cost, nowMs ?? Date.now(), d, maxDelayMs);
    return d;
  }

  /** One decision's 5 integers per limit, from a script call of its own or a batch; rejects at once when its lane is down. */
  private call(
    mode: Pending["mode"],
    key: string,
    cost: number,
    nowMs: number | undefined,
    maxDelayMs?: number,
  ): Promise<readonly unknown[]> {
    return new Promise<readonly unknown[]>((resolve, reject) => {
      const p: Pending = { mode, key, cost, nowMs, maxDelayMs, resolve, reject };
      if (this.batchers !== undefined) this.batcherOf(key).submit(p);
      else void this.send([p]);
    });
  }

  /**
   * One script call for `batch` (in order); each decision gets its slice of the reply. Time is
   * Redis's, by the store's calibrated clock (server-clock.ts), or "" when a reading of `TIME` is
   * due (the script then replies with it as one more element).
   */
  private async send(batch: Pending[]): Promise<void> {
    const first = batch[0] as Pending;
    const keys: string[] = [];
    for (const p of batch) for (const k of this.keysOf(p.key)) keys.push(k);
    const lane = this.store.lanes.of(keys[0] as string);
    if (lane.breaker.state !== "closed") {
      const err = new RedisDownError();
      for (const p of batch) p.reject(err);
      return;
    }
    lane.probeKey = keys[0] as string;
    const clock = this.store.serverClock;
    if (this.fast && batch.length === 1 && (first.mode === "c" || first.mode === "p")) {
      const now = first.nowMs ?? clock.now();
      if (now !== undefined) return this.sendFast(first, now, keys, lane);
    }
    const args = this.format.head.slice();
    let server: string | undefined;
    for (const p of batch) {
      if (p.nowMs === undefined) server ??= String(clock.now() ?? "");
      args.push(p.mode, p.nowMs === undefined ? (server as string) : String(p.nowMs), String(p.cost));
      if (this.shapes) args.push(p.maxDelayMs === undefined ? "" : String(p.maxDelayMs));
    }
    const sentAt = clock.mark();
    const n = 5 * this.n * batch.length;
    const valid = (r: unknown): r is unknown[] => Array.isArray(r) && (r.length === n || r.length === n + 1);
    let reply: unknown;
    try {
      reply = await this.store.exchange(
        lane,
        () => this.store.run(lane, this.script, keys, args),
        batch.length,
        (late) => {
          if (valid(late)) this.giveBack(batch, (_p, d) => this.admitted(late, d));
        },
      );
    } catch (e) {
      for (const p of batch) p.reject(e);
      return;
    }
    if (!valid(reply)) {
      const err = new RateLimitStoreError(`RedisStore: unexpected script reply ${describeValue(reply)}`);
      for (const p of batch) p.reject(err);
      return;
    }
    if (reply.length > n) clock.reading(sentAt, Number(reply[n]));
    const width = 5 * this.n;
    const r = reply;
    batch.forEach((p, d) => p.resolve(r.slice(d * width, (d + 1) * width)));
  }

  /**
   * A lone consume or peek by the script's fast path: the reply is the state the script decided
   * on, and `check` on it gives the outcome (fast-reply.ts), passed on as the general reply's 5 integers.
   */
  private async sendFast(p: Pending, now: number, keys: string[], lane: Lane): Promise<void> {
    const lim = this.limits[0] as ResolvedLimit;
    const args = [p.mode === "c" ? "C" : "P", String(now), String(p.cost), ...this.fastTail];
    if (this.shapes) args.push(p.maxDelayMs === undefined ? "" : String(p.maxDelayMs));
    const outcome = (raw: unknown): number[] => {
      const out = this.format.ev.outcomes[0] as Outcome;
      fastOutcome(raw, lim, now, p.cost, out, p.maxDelayMs);
      return [out.allowed ? 1 : 0, out.remaining, out.retryAfterMs, out.resetAfterMs, out.delayMs];
    };
    let raw: unknown;
    try {
      raw = await this.store.exchange(
        lane,
        () => this.store.run(lane, this.script, keys, args, true),
        1,
        (late) => this.giveBack([p], () => outcome(late)[0] === 1),
      );
    } catch (e) {
      p.reject(e);
      return;
    }
    try {
      p.resolve(outcome(raw));
    } catch (e) {
      p.reject(new RateLimitStoreError(`RedisStore: unexpected script reply (${(e as Error).message})`));
    }
  }

  /** Whether decision `d` of a general reply admitted on every limit. */
  private admitted(reply: readonly unknown[], d: number): boolean {
    const width = 5 * this.n;
    for (let i = 0; i < this.n; i++) if (Number(reply[d * width + 5 * i]) !== 1) return false;
    return true;
  }

  /**
   * A reply that came after the failure policy had answered its decisions: every consume it
   * admitted charged Redis for a request the caller was told about otherwise, so refund it.
   */
  private giveBack(batch: Pending[], admitted: (p: Pending, d: number) => boolean): void {
    batch.forEach((p, d) => {
      if (p.mode !== "c") return;
      try {
        if (!admitted(p, d)) return;
      } catch {
        return; // a reply that cannot be read: nothing known to give back
      }
      this.call("r", p.key, p.cost, p.nowMs).catch((e: unknown) =>
        this.store.report(e, { op: "refund", key: p.key, timedOut: e instanceof RedisTimeoutError }),
      );
    });
  }

  /** Builds the decision from the script's 5 integers per limit. */
  private toDecision(r: readonly unknown[], cost: number): Decision {
    return this.format.decision(r, cost);
  }

  /** The local store that stands in while Redis is down, when the policy has one (insurance, degraded). */
  private fallbackStore(): BoundStore | DegradedLimiter | undefined {
    const f = this.store.failure;
    if (typeof f === "object") {
      this.insurance ??= f.insurance.bind(this.limits, this.namespace);
      return this.insurance;
    }
    if (f === "degraded") {
      this.degraded ??= new DegradedLimiter(
        this.limits,
        this.namespace,
        () => this.store.localStore(),
        () => this.store.instances(),
      );
      return this.degraded;
    }
    return undefined;
  }

  /** A consume or peek that Redis did not answer: the failure policy decides. */
  private async failed(e: unknown, call: DecisionCall): Promise<Decision> {
    // While the breaker is open no call is made; the change of state was reported once.
    const err = e instanceof RedisDownError ? new RateLimitStoreError(e.message, { cause: e }) : this.report(e, call.op, call.key);
    const local = () => this.fallbackStore() as BoundStore | DegradedLimiter;
    const d = await decideByPolicy(this.store.failure, err, this.limits, local, call);
    // What the degraded limiter admitted is charged to Redis once it answers again.
    if (d.reason === "degraded" && call.op === "consume" && d.allowed) {
      this.store.holdsLedger(this);
      this.store.reconcileSoon(this.store.lanes.of(this.keysOf(call.key)[0] as string));
    }
    return d;
  }

  /** A refund or reset that Redis did not take: report; a local store applies it; "throw" rejects. */
  private async failedWrite(e: unknown, op: "refund" | "reset", key: string, local: () => void | Promise<void> | undefined): Promise<void> {
    const err = e instanceof RedisDownError ? new RateLimitStoreError(e.message, { cause: e }) : this.report(e, op, key);
    if (this.store.failure === "throw") throw err;
    await local();
  }

  private report(e: unknown, op: "consume" | "peek" | "refund" | "reset", key: string): RateLimitStoreError {
    return this.store.report(e, { op, key, timedOut: e instanceof RedisTimeoutError });
  }
}
