import { newDecision, type Decision, type Outcome } from "../../core/decision.js";
import { describeValue, RateLimitStoreError } from "../../core/errors.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BoundStore, ClockOptions } from "../../store.js";
import { Batcher, type Pending } from "./batcher.js";
import { Reconciler } from "./charge.js";
import { DenialCache } from "./denial-cache.js";
import { FastCall, fastConsts, type FastItem } from "./fast-call.js";
import { FastOp } from "./fast-op.js";
import { fastForeignMarker, foreignValueError, settleGeneral } from "./foreign-value.js";
import { namingKeys } from "./client.js";
import { QueuedDecision, type QueuedOwner } from "./queued-decision.js";
import { redisDown, RedisTimeoutError, type Lane } from "./lanes.js";
import { loadScript, SECTIONS_OF, type LoadedScript } from "./scripts.js";
import { ScriptFormat } from "./script-format.js";
import { TableFallback } from "./table-fallback.js";
import { withoutRedis, type DecisionCall } from "./without-redis.js";
import type { RedisStore } from "./store.js";

/** One limiter's view of a {@link RedisStore}: its script, key layout, batching, denial cache and failure policy. */
export class RedisTable implements BoundStore, QueuedOwner {
  /** Keys, ARGV header and reply reading, shared with the HTTP Redis store. */
  private readonly format: ScriptFormat;
  private readonly single: boolean;
  private readonly n: number;
  /** Batching (option `batch`): one Batcher per lane, i.e. per hash slot on a cluster, since a script call may touch one slot only. */
  private readonly batchers: Map<Lane, Batcher> | undefined;
  private readonly denials: DenialCache | undefined;
  /** The failure policy's answers, and its local stores. */
  private readonly fallback: TableFallback;
  /** Charges Redis with what the `"degraded"` policy admitted (charge.ts). */
  private readonly reconciler: Reconciler;
  /** The script built with exactly the algorithms of these limits. */
  readonly script: LoadedScript;
  /** Lone decisions by the script's fast path (ratekeeper.lua, modes "C"/"P"), when the limits allow it. */
  private readonly fast: FastCall | undefined;
  /**
   * Whether a limit shapes (leaky bucket `mode: "shape"`): then each consume carries the caller's
   * longest wait (`maxDelayMs`) to the script, one more ARGV per decision. Otherwise the bound
   * cannot matter and is dropped here.
   */
  private readonly shapes: boolean;

  constructor(
    readonly store: RedisStore,
    private readonly limits: readonly ResolvedLimit[],
    private readonly namespace: string,
    /** `{ injectedClock: true }` when the limiter injects its clock: the failure policy's local tables are bound with it. */
    clock?: ClockOptions,
  ) {
    const o = store.opts;
    this.format = new ScriptFormat(limits, o.prefix, namespace, o.minTtlMs);
    this.single = limits.length === 1;
    this.n = limits.length;
    // One limit with a two-number state or a sliding window, on a client that can return raw bytes: the script's fast path.
    const fast = fastConsts(limits, store);
    this.script = loadScript(
      "ratekeeper",
      [...limits.flatMap((l) => SECTIONS_OF[l.algorithm] ?? []), ...(fast ? ["fast-pair"] : [])],
      fast,
    );
    this.shapes = limits.some((l) => l.shape);
    this.fast = fast ? new FastCall(store, limits, this.script, this.format.ev.outcomes[0] as Outcome, this.shapes) : undefined;
    this.denials = o.denialMaxKeys > 0 ? new DenialCache(o.denialMaxKeys) : undefined;
    if (o.maxBatch > 0) this.batchers = new Map();
    this.fallback = new TableFallback(store, this, limits, namespace, (key) => this.keysOf(key)[0] as string, clock);
    const consumeAll = async (key: string, cost: number, nowMs: number | undefined) =>
      this.toDecision(await this.call("c", key, cost, nowMs), cost);
    this.reconciler = new Reconciler(this, limits, namespace, () => this.fallback.degraded, consumeAll);
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
        redisDown,
      );
      batchers.set(lane, b);
    }
    return b;
  }

  /** Units admitted while degraded that the ledger could not hold. */
  get unrecorded(): number {
    return this.fallback.degraded?.unrecorded ?? 0;
  }

  /** The Redis keys of `key`, one per limit, all with the hash tag `{<namespace>:<key>}`. */
  keysOf(key: string): string[] {
    return this.format.keysOf(key);
  }

  consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Promise<Decision> {
    const bound = this.shapes ? maxDelayMs : undefined;
    // A refusal first (a rejected promise, passed on as is): a cached denial of a smaller cost is no answer to it.
    const hit = this.format.refuseCost(cost) ?? this.denials?.get(key, cost, nowMs ?? Date.now(), bound);
    if (hit !== undefined) return Promise.resolve(hit);
    return this.decide({ op: "consume", key, cost, nowMs, maxDelayMs: bound });
  }

  peek(key: string, cost: number, nowMs: number | undefined): Promise<Decision> {
    const hit = this.format.refuseCost(cost) ?? this.denials?.get(key, cost, nowMs ?? Date.now());
    if (hit !== undefined) return Promise.resolve(hit);
    return this.decide({ op: "peek", key, cost, nowMs, maxDelayMs: undefined });
  }

  async refund(key: string, cost: number, nowMs: number | undefined): Promise<void> {
    this.denials?.delete(key);
    try {
      await this.call("r", key, cost, nowMs);
    } catch (e) {
      await this.fallback.write(e, "refund", key, () => this.fallback.local()?.refund(key, cost, nowMs));
    }
  }

  async reset(key: string): Promise<void> {
    this.denials?.delete(key);
    try {
      await this.call("x", key, 1, undefined);
    } catch (e) {
      await this.fallback.write(e, "reset", key, () => this.fallback.local()?.reset(key));
    }
    // The local stores may hold state from an outage: forget it too.
    await this.fallback.reset(key);
  }

  /** Charges Redis with what this limiter admitted on its own while `lane` was down (charge.ts). */
  reconcile(lane: Lane): Promise<void> {
    return this.reconciler.reconcile(lane);
  }

  private decide(call: DecisionCall): Promise<Decision> {
    this.store.checkConnection();
    if (!this.store.enter()) return Promise.resolve(withoutRedis(this.limits, "overloaded", false));
    const down = this.whileDown(call);
    if (down !== undefined) return down;
    // Unbatched, by the fast path when it can go that way now; else queued (queued-decision.ts).
    return (this.batchers === undefined ? this.decideFast(call) : undefined) ?? new QueuedDecision(this, call).start();
  }

  /**
   * While the breaker of the call's lane is open, the failure policy's decision at once, without
   * queueing it for a script call that would only be refused; undefined when the lane is up, or
   * when decisions wait in its batch (queued before the breaker opened): queued behind them, this
   * one's refusal answers them too (batcher.ts).
   */
  private whileDown(call: DecisionCall): Promise<Decision> | undefined {
    if (this.store.breakers.state === "closed") return undefined; // every lane is up: no lane to find
    const lane = this.store.lanes.of(this.store.opts.shim.isCluster ? (this.keysOf(call.key)[0] as string) : "");
    if (lane.breaker.state === "closed" || (this.batchers !== undefined && this.batchers.get(lane)?.idle === false)) return undefined;
    this.store.leave();
    return this.fallback.decision(redisDown(), call);
  }

  /** @internal {@link QueuedOwner}: a decision's slice of a general reply. */
  generalDecision(outcome: readonly unknown[], call: DecisionCall): Decision {
    return this.remembered(this.toDecision(outcome, call.cost), call);
  }

  /** @internal {@link QueuedOwner}: to its lane's batch, or a script call of its own. */
  enqueue(p: Pending): void {
    if (this.batchers !== undefined) this.batcherOf(p.key).submit(p);
    else void this.send([p]);
  }

  /**
   * An unbatched lone decision by the fast path, as one object in flight (fast-op.ts says why);
   * undefined when it cannot go that way now (its lane is down, or a reading of Redis's clock is
   * due), and the general path takes it. Leaves the store's pending count when settled.
   */
  private decideFast(call: DecisionCall): Promise<Decision> | undefined {
    const fast = this.fast;
    if (fast === undefined) return undefined;
    const keys = this.keysOf(call.key);
    const lane = this.store.lanes.of(keys[0] as string);
    if (lane.breaker.state !== "closed") return undefined;
    const now = call.nowMs ?? this.store.serverClock.now();
    if (now === undefined) return undefined;
    lane.probeKey = keys[0] as string;
    const args = fast.args(now, call.op === "consume", call.cost, call.maxDelayMs);
    return new FastOp(this, fast, lane, keys, args, call, now).start();
  }

  /** @internal FastOwner (fast-op.ts): the decision of a fast-path reply's outcome. */
  outcomeDecision(out: Outcome, call: DecisionCall): Decision {
    return this.remembered(newDecision(out, this.limits[0] as ResolvedLimit, 0, undefined), call);
  }

  /** `d`, after the denial cache (when on) has noted it if it denied a consume. */
  private remembered(d: Decision, call: DecisionCall): Decision {
    if (call.op === "consume" && !d.allowed && this.denials !== undefined)
      this.denials.remember(call.key, call.cost, call.nowMs ?? Date.now(), d, call.maxDelayMs);
    return d;
  }

  /** @internal FastOwner (fast-op.ts): the failure policy's decision. */
  failedDecision = (e: unknown, call: DecisionCall): Promise<Decision> =>
    this.fallback.decision(namingKeys(e, this.keysOf(call.key)), call);
  /** @internal FastOwner (fast-op.ts): a late admission, given back. */
  lateAdmit = (call: DecisionCall): void => this.lateRefund(call.key, call.cost, call.nowMs);

  /** One decision's 5 integers per limit, from a script call of its own or a batch; rejects at once when its lane is down. */
  private call(
    mode: Pending["mode"],
    key: string,
    cost: number,
    nowMs: number | undefined,
    maxDelayMs?: number,
  ): Promise<readonly unknown[]> {
    return new Promise<readonly unknown[]>((resolve, reject) => this.enqueue({ mode, key, cost, nowMs, maxDelayMs, resolve, reject }));
  }

  /**
   * One script call for `batch` (in order); each decision gets its slice of the reply. Time is
   * Redis's, by the store's calibrated clock (server-clock.ts), or "" when a reading of `TIME` is
   * due (the script then replies with it as one more element).
   */
  private async send(batch: Pending[]): Promise<void> {
    const keys: string[] = [];
    for (const p of batch) for (const k of this.keysOf(p.key)) keys.push(k);
    // A reset's epoch key comes after every decision's state keys (ratekeeper.lua's "x").
    for (const p of batch) if (p.mode === "x") for (const k of this.format.resetKeysOf(p.key)) keys.push(k);
    const lane = this.store.lanes.of(keys[0] as string);
    if (lane.breaker.state !== "closed") {
      const err = redisDown();
      for (const p of batch) p.reject(err);
      return;
    }
    lane.probeKey = keys[0] as string;
    const clock = this.store.serverClock;
    if (this.fast !== undefined && batch.every((p) => p.mode === "c" || p.mode === "p")) {
      // Lone decisions on one two-number limit, however many: the fast path, one key each.
      const server = batch.every((p) => p.nowMs !== undefined) ? 0 : clock.now();
      if (server !== undefined) return this.sendFast(this.fast, batch, server, keys, lane);
    }
    const args = this.format.head.slice();
    let server: string | undefined;
    for (const p of batch) {
      if (p.nowMs === undefined && server === undefined) {
        const t = clock.now();
        if (t === undefined) clock.asking(); // this call reads TIME ("" as its time)
        server = t === undefined ? "" : String(t);
      }
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
    batch.forEach((p, d) => settleGeneral(p, r, d, width));
  }

  /** Consumes and peeks of a batch by the fast path (one or many): their outcomes as the general reply's 5 integers each. */
  private async sendFast(fast: FastCall, batch: Pending[], server: number, keys: string[], lane: Lane): Promise<void> {
    const items = batch.map((p) => ({ consume: p.mode === "c", now: p.nowMs ?? server, cost: p.cost, maxDelayMs: p.maxDelayMs }));
    const late = (i: number) => {
      const p = batch[i] as Pending;
      this.lateRefund(p.key, p.cost, p.nowMs);
    };
    let replies: unknown;
    try {
      if (batch.length === 1) {
        const it = items[0] as FastItem;
        replies = [await fast.send(lane, keys, it.now, it.consume, it.cost, it.maxDelayMs, () => late(0))];
      } else replies = await fast.sendBatch(lane, keys, items, late);
    } catch (e) {
      for (const p of batch) p.reject(e);
      return;
    }
    batch.forEach((p, i) => {
      const it = items[i] as FastItem;
      try {
        if (!Array.isArray(replies) || replies.length !== batch.length)
          throw new Error(`${describeValue(replies)} for ${batch.length} decisions`);
        const bad = fastForeignMarker(replies[i]);
        if (bad !== undefined) return p.reject(foreignValueError(bad));
        const out = fast.read(replies[i], it.now, it.cost, it.maxDelayMs);
        if (p.resolveOutcome !== undefined) p.resolveOutcome(out);
        else p.resolve([out.allowed ? 1 : 0, out.remaining, out.retryAfterMs, out.resetAfterMs, out.delayMs]);
      } catch (e) {
        p.reject(new RateLimitStoreError(`RedisStore: unexpected script reply (${(e as Error).message})`));
      }
    });
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
      this.lateRefund(p.key, p.cost, p.nowMs);
    });
  }

  /** Gives back what a reply admitted after the failure policy had already answered its decision. */
  private lateRefund(key: string, cost: number, nowMs: number | undefined): void {
    this.call("r", key, cost, nowMs).catch((e: unknown) =>
      this.store.report(e, { op: "refund", key, timedOut: e instanceof RedisTimeoutError }),
    );
  }

  /** Builds the decision from the script's 5 integers per limit. */
  private toDecision(r: readonly unknown[], cost: number): Decision {
    return this.format.decision(r, cost);
  }
}
