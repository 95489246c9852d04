import { newDecision, type Decision, type Outcome } from "../../core/decision.js";
import {
  collectIssues,
  describeValue,
  RateLimitConfigError,
  RateLimitStoreError,
  unknownOptions,
  type ConfigIssue,
} from "../../core/errors.js";
import { Evaluator } from "../../core/evaluate.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BindOptions, BoundLeases, BoundStore, Store } from "../../store.js";
import { LeasedTable } from "../leased-table.js";
import { RedisBlockSource } from "./lease-source.js";
import { isNoScript, shimFor, type RedisClientLike, type RedisShim } from "./client.js";
import { loadScript, SECTIONS_OF, type LoadedScript } from "./scripts.js";
import { fastOutcome, FAST_ALGORITHMS } from "./fast-reply.js";
import { RedisLeases } from "./leases.js";
import { ServerClock } from "./server-clock.js";

/**
 * What a {@link RedisStore} does when Redis fails or does not answer within `timeoutMs`:
 * - `"open"`: admit (`allowed: true`, `reason: "store-error"`).
 * - `"closed"`: deny (`allowed: false`, `reason: "store-error"`, `retryAfterMs: 1000`).
 * - `"throw"`: reject the call with a `RateLimitStoreError` (its `cause` is the Redis error).
 * - `{ insurance }`: decide with this store (normally a `MemoryStore`) instead, which keeps limiting locally,
 *   per process (`reason: "insurance"` on every decision it makes, allowed or not).
 */
export type RedisFailurePolicy = "open" | "closed" | "throw" | { insurance: Store };

/** What failed, for {@link RedisStoreOptions.onError}. */
export interface RedisErrorContext {
  readonly op: "consume" | "peek" | "refund" | "reset" | "acquire" | "renew" | "release" | "count" | "lease";
  /** The limiter's key (without prefix and namespace). */
  readonly key: string;
  /** Whether the call timed out (else Redis or the client reported an error). */
  readonly timedOut: boolean;
}

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * An ioredis `Redis` or `Cluster`, or a node-redis client or cluster (already connecting).
   * The store never closes it.
   */
  client: RedisClientLike;
  /** Prepended to every key. @default "rk:" */
  prefix?: string;
  /**
   * The most milliseconds one call waits for Redis before the failure policy decides. A reply
   * arriving later is ignored (and never becomes an unhandled rejection). `0`: no timeout.
   * @default 50
   */
  timeoutMs?: number;
  /**
   * What to do when Redis fails or times out. The default, `"open"`, admits: a rate limiter
   * protects a service, and an outage of its Redis should not become an outage of the service
   * (the choice express-rate-limit's `passOnStoreError` and most gateways make). Choose
   * `"closed"` where over-admission is worse than refusing (login attempts, paid APIs), or an
   * insurance `MemoryStore` to keep limiting per process.
   * @default "open"
   */
  failure?: RedisFailurePolicy;
  /**
   * Called with every Redis failure (errors and timeouts), wrapped in a `RateLimitStoreError`
   * whose `cause` is the original error. Exceptions thrown by it are swallowed.
   * @default undefined (failures are only visible through `reason` on decisions)
   */
  onError?: (error: RateLimitStoreError, context: RedisErrorContext) => void;
  /**
   * Remember denials locally: a key denied with `retryAfterMs = R` is denied again without a
   * Redis call (`reason: "denial-cache"`) until R has passed, for requests costing at least as
   * much. A flood from one client then costs Redis one call per R. Bounded by `maxKeys` (oldest
   * entries dropped first). Per process: a refund or reset on another server is not seen until R passes.
   * @default false
   */
  denialCache?: boolean | { maxKeys?: number };
  /**
   * Send the decisions that wait while earlier ones are in flight together, in one script call
   * (each still atomic and all-or-nothing; order kept): fewer calls, less Redis CPU per decision
   * under load (docs/benchmarks/redis.md). At most 2 calls in flight per limiter, each carrying
   * up to `maxBatch` decisions; a failed call fails every decision in it (each gets the failure
   * policy). At low load nothing waits, so every decision still goes out at once on its own.
   * Single Redis only (a cluster call may touch one hash slot): `false` with a cluster client.
   * `false` makes exactly one script call per decision.
   * @default true with a single Redis, false with a cluster
   */
  batch?: boolean | { maxBatch?: number };
  /**
   * The least TTL (ms) given to a written key. Keys live exactly as long as their state matters
   * (`resetAfterMs`) in Redis's own time; with an injected clock that runs slower than real time
   * (replays, tests with a manual clock) raise it so keys outlive their logical lifetime.
   * @default 0
   */
  minTtlMs?: number;
}

const FAIL_CLOSED_RETRY_MS = 1000;
const REDIS_STORE_OPTIONS = ["client", "prefix", "timeoutMs", "failure", "onError", "denialCache", "batch", "minTtlMs"];

/**
 * The Redis store: exact across any number of app servers. One Lua script call (EVALSHA, EVAL on
 * NOSCRIPT) per decision, every limit of the key included, all-or-nothing; the Lua mirrors
 * `core/algorithms` exactly. Time is Redis's own clock (`TIME`) unless the limiter injects one.
 *
 * Keys: `<prefix>{<namespace>:<key>}:<limit index>`; the braces are a Redis Cluster hash tag, so
 * every key of one decision sits in one slot. Every key written gets a TTL.
 * @example
 * import Redis from "ioredis";
 * import { RateLimiter } from "ratekeeper";
 * import { RedisStore } from "ratekeeper/redis";
 * const store = new RedisStore({ client: new Redis(process.env.REDIS_URL), failure: "open" });
 * const limiter = new RateLimiter({ algorithm: "sliding-window", limit: 100, window: "1m", store });
 */
export class RedisStore implements Store {
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly failure: RedisFailurePolicy;
  readonly minTtlMs: number;
  /** @internal */
  readonly shim: RedisShim;
  /** @internal */
  readonly onError: RedisStoreOptions["onError"];
  /** @internal */
  readonly denialMaxKeys: number;
  /** @internal 0: no batching. */
  readonly maxBatch: number;
  /** Limiters with quota leasing, whose blocks {@link RedisStore.close} gives back. */
  private readonly leased = new Set<LeasedTable>();
  /** @internal Redis's time, kept calibrated against TIME (server-clock.ts). */
  readonly serverClock = new ServerClock();

  constructor(options: RedisStoreOptions) {
    if (typeof options !== "object" || options === null) {
      throw new RateLimitConfigError([{ path: "options", message: `must be an object with a client (got ${describeValue(options)})` }]);
    }
    const issues: ConfigIssue[] = [];
    unknownOptions(options, REDIS_STORE_OPTIONS, issues);
    const shim = collectIssues(issues, () => shimFor(options.client));
    const prefix = options.prefix ?? "rk:";
    if (typeof prefix !== "string" || prefix.includes("{") || prefix.includes("}")) {
      issues.push({ path: "prefix", message: `must be a string without "{" or "}" (got ${describeValue(options.prefix)})` });
    }
    const timeoutMs = options.timeoutMs ?? 50;
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0) {
      issues.push({ path: "timeoutMs", message: `must be a whole number of ms >= 0 (got ${describeValue(options.timeoutMs)})` });
    }
    const failure = options.failure ?? "open";
    const insurance = typeof failure === "object" && failure !== null ? (failure as { insurance?: unknown }).insurance : undefined;
    if (
      failure !== "open" &&
      failure !== "closed" &&
      failure !== "throw" &&
      !(typeof insurance === "object" && insurance !== null && typeof (insurance as Store).bind === "function")
    ) {
      issues.push({
        path: "failure",
        message: `must be "open", "closed", "throw" or { insurance: new MemoryStore() } (got ${describeValue(options.failure)})`,
      });
    }
    if (options.onError !== undefined && typeof options.onError !== "function") {
      issues.push({ path: "onError", message: `must be a function (got ${describeValue(options.onError)})` });
    }
    let denialMaxKeys = 0;
    const dc = options.denialCache;
    if (dc === true) denialMaxKeys = 10_000;
    else if (typeof dc === "object" && dc !== null) {
      denialMaxKeys = dc.maxKeys ?? 10_000;
      if (!Number.isSafeInteger(denialMaxKeys) || denialMaxKeys < 1) {
        issues.push({ path: "denialCache.maxKeys", message: `must be a whole number >= 1 (got ${describeValue(dc.maxKeys)})` });
      }
    } else if (dc !== undefined && dc !== false) {
      issues.push({ path: "denialCache", message: `must be true, false or { maxKeys } (got ${describeValue(dc)})` });
    }
    let maxBatch = 0;
    const bo = options.batch ?? (shim !== undefined && !shim.isCluster);
    if (bo === true) maxBatch = 128;
    else if (typeof bo === "object" && bo !== null) {
      maxBatch = bo.maxBatch ?? 128;
      if (!Number.isSafeInteger(maxBatch) || maxBatch < 1 || maxBatch > 10_000) {
        issues.push({ path: "batch.maxBatch", message: `must be a whole number from 1 to 10000 (got ${describeValue(bo.maxBatch)})` });
      }
    } else if (bo !== undefined && bo !== false) {
      issues.push({ path: "batch", message: `must be true, false or { maxBatch } (got ${describeValue(bo)})` });
    }
    if (maxBatch > 0 && shim?.isCluster) {
      issues.push({ path: "batch", message: "is not available with a Redis Cluster client (a script call may only touch one hash slot)" });
    }
    const minTtlMs = options.minTtlMs ?? 0;
    if (!Number.isSafeInteger(minTtlMs) || minTtlMs < 0) {
      issues.push({ path: "minTtlMs", message: `must be a whole number of ms >= 0 (got ${describeValue(options.minTtlMs)})` });
    }
    if (issues.length > 0) throw new RateLimitConfigError(issues, "RedisStore");
    this.shim = shim as RedisShim;
    this.prefix = prefix;
    this.timeoutMs = timeoutMs;
    this.failure = failure;
    this.onError = options.onError;
    this.denialMaxKeys = denialMaxKeys;
    this.minTtlMs = minTtlMs;
    this.maxBatch = maxBatch;
    // Fail at construction, not on the first decision, if the scripts did not ship.
    loadScript("ratekeeper", []);
  }

  bind(limits: readonly ResolvedLimit[], namespace: string, options?: BindOptions): BoundStore {
    const table = new RedisTable(this, limits, namespace);
    const lease = options?.lease;
    if (lease === undefined) return table;
    const lim = limits[0] as ResolvedLimit;
    const leased = new LeasedTable(lim, new RedisBlockSource(this, lim, namespace, lease), table, lease);
    this.leased.add(leased);
    return leased;
  }

  /** Gives back every unit this process holds in leased blocks (RateLimiter option `lease`): call it when the process stops. Never closes the client. */
  async close(): Promise<void> {
    await Promise.all([...this.leased].map((t) => t.close()));
  }

  /** A concurrency limit's leases in Redis (leases.ts, scripts/concurrency.lua). */
  bindLeases(limit: number, namespace: string): BoundLeases {
    return new RedisLeases(this, limit, namespace);
  }

  /** @internal Runs a script: EVALSHA, then EVAL when the server lacks it (restart, failover, new node). */
  async run(script: LoadedScript, keys: string[], args: string[], buffers = false): Promise<unknown> {
    const shim = this.shim;
    try {
      return await (buffers ? shim.evalshaBuffer!(script.sha, keys, args) : shim.evalsha(script.sha, keys, args));
    } catch (e) {
      if (!isNoScript(e)) throw e;
      return await (buffers ? shim.evalBuffer!(script.source, keys, args) : shim.eval(script.source, keys, args));
    }
  }

  /**
   * @internal Races `p` against the timeout. The promise `p` always gets a handler, so a reply or
   * error arriving after the timeout is dropped instead of becoming an unhandled rejection.
   */
  withTimeout<T>(p: Promise<T>, ms = this.timeoutMs): Promise<T> {
    if (this.timeoutMs === 0) return p;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new TimeoutError(this.timeoutMs)), ms);
      p.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (e: unknown) => {
          clearTimeout(timer);
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
  }

  /** @internal Wraps and reports a failure; never throws. */
  report(cause: unknown, ctx: RedisErrorContext): RateLimitStoreError {
    const what = ctx.timedOut ? `no reply within ${this.timeoutMs} ms` : cause instanceof Error ? cause.message : String(cause);
    const err = new RateLimitStoreError(`RedisStore ${ctx.op} "${ctx.key}": ${what}`, { cause });
    if (this.onError) {
      try {
        this.onError(err, ctx);
      } catch {
        /* a failing error handler must not turn a store failure into a crash */
      }
    }
    return err;
  }
}

class TimeoutError extends Error {
  override readonly name = "TimeoutError";
  constructor(ms: number) {
    super(`no reply within ${ms} ms`);
  }
}

/** A remembered denial: until when (ms, the store's clock) requests costing >= cost are denied. */
interface Denial {
  untilMs: number;
  cost: number;
  atMs: number;
  d: Decision;
}

/** A decision waiting for (or in) a script call. */
interface Pending {
  mode: "c" | "p" | "r" | "x";
  key: string;
  cost: number;
  nowMs: number | undefined;
  /** The decision's slice of the script reply: 5 integers per limit (converted by toDecision). */
  resolve: (outcome: readonly unknown[]) => void;
  reject: (error: unknown) => void;
  /** When its timeout ends (Date.now() ms); only set when batching. */
  deadlineMs: number;
}

/** Script calls in flight per limiter when batching; later decisions wait and go together. */
const MAX_IN_FLIGHT = 2;

/** One limiter's view of a {@link RedisStore}. */
class RedisTable implements BoundStore {
  private readonly ev: Evaluator;
  private readonly single: boolean;
  /** ARGV[1..2+8N]: minTtlMs, N, then 8 entries per limit (ratekeeper.lua's header). */
  private readonly head: string[];
  private readonly queue: Pending[] = [];
  private queueTimer: ReturnType<typeof setTimeout> | undefined;
  private inFlight = 0;
  private readonly keyHead: string;
  private readonly n: number;
  private insurance: BoundStore | undefined;
  private readonly denials: Map<string, Denial> | undefined;
  /** The script built with exactly the algorithms of these limits. */
  readonly script: LoadedScript;
  /** Whether lone decisions take the script's fast path (ratekeeper.lua, modes "C"/"P"). */
  private readonly fast: boolean;
  /** The fast path's ARGV[4..8]: limit, windowMs, kind (f / F / b), capacity, minTtlMs. */
  private readonly fastTail: string[];

  constructor(
    private readonly store: RedisStore,
    private readonly limits: readonly ResolvedLimit[],
    private readonly namespace: string,
  ) {
    this.ev = new Evaluator(limits);
    this.single = limits.length === 1;
    this.n = limits.length;
    this.head = [String(store.minTtlMs), String(limits.length)];
    for (const l of limits) {
      this.head.push(
        String(l.algorithmId),
        String(l.limit),
        String(l.windowMs),
        String(l.capacity),
        String(l.buckets),
        l.weighted ? "1" : "0",
        l.alignFirst ? "1" : "0",
        l.shape ? "1" : "0",
      );
    }
    this.keyHead = `${store.prefix}{${namespace}:`;
    // One limit with a two-number state, on a client that can return raw bytes: the script's fast path.
    this.fast = this.single && FAST_ALGORITHMS.has((limits[0] as ResolvedLimit).algorithm) && store.shim.evalshaBuffer !== undefined;
    this.script = loadScript("ratekeeper", [...limits.flatMap((l) => SECTIONS_OF[l.algorithm] ?? []), ...(this.fast ? ["fast-pair"] : [])]);
    const l0 = limits[0] as ResolvedLimit;
    const kind = l0.algorithm !== "fixed-window" ? "b" : l0.alignFirst ? "F" : "f";
    this.fastTail = [String(l0.limit), String(l0.windowMs), kind, String(l0.capacity), String(store.minTtlMs)];
    this.denials = store.denialMaxKeys > 0 ? new Map() : undefined;
  }

  /** The Redis keys of `key`, one per limit, all with the hash tag `{<namespace>:<key>}`. */
  keysOf(key: string): string[] {
    const head = `${this.keyHead}${key}}:`;
    const keys = new Array<string>(this.n);
    for (let i = 0; i < this.n; i++) keys[i] = head + i;
    return keys;
  }

  consume(key: string, cost: number, nowMs: number | undefined): Promise<Decision> {
    if (this.denials !== undefined) {
      const hit = this.cachedDenial(key, cost, nowMs);
      if (hit !== undefined) return Promise.resolve(hit);
    }
    return this.decide("c", key, cost, nowMs);
  }

  peek(key: string, cost: number, nowMs: number | undefined): Promise<Decision> {
    if (this.denials !== undefined) {
      const hit = this.cachedDenial(key, cost, nowMs);
      if (hit !== undefined) return Promise.resolve(hit);
    }
    return this.decide("p", key, cost, nowMs);
  }

  async refund(key: string, cost: number, nowMs: number | undefined): Promise<void> {
    this.denials?.delete(key);
    try {
      await this.call("r", key, cost, nowMs);
    } catch (e) {
      await this.failedWrite(e, "refund", key, () => this.insuranceStore()?.refund(key, cost, nowMs));
    }
  }

  async reset(key: string): Promise<void> {
    this.denials?.delete(key);
    try {
      // Without batching a plain DEL (one slot: the keys share a hash tag); with batching in the
      // script, so that it stays in order with the decisions queued before it.
      if (this.store.maxBatch === 0) await this.store.withTimeout(this.store.shim.del(this.keysOf(key)));
      else await this.call("x", key, 1, undefined);
    } catch (e) {
      await this.failedWrite(e, "reset", key, () => this.insuranceStore()?.reset(key));
    }
    // The insurance store may hold state from an outage: forget it too.
    if (this.insurance) await this.insurance.reset(key);
  }

  private async decide(mode: "c" | "p", key: string, cost: number, nowMs: number | undefined): Promise<Decision> {
    let outcome: readonly unknown[];
    try {
      outcome = await this.call(mode, key, cost, nowMs);
    } catch (e) {
      return this.failed(e, mode === "c" ? "consume" : "peek", key, cost, nowMs);
    }
    const d = this.toDecision(outcome, cost);
    if (mode === "c" && !d.allowed && this.denials !== undefined) this.remember(key, cost, nowMs, d);
    return d;
  }

  /** One decision's 5 integers per limit, from a script call of its own or a batch. */
  private call(mode: Pending["mode"], key: string, cost: number, nowMs: number | undefined): Promise<readonly unknown[]> {
    return new Promise<readonly unknown[]>((resolve, reject) => {
      const p: Pending = { mode, key, cost, nowMs, resolve, reject, deadlineMs: 0 };
      if (this.store.maxBatch === 0) {
        // One call per decision: the call's own timeout is the decision's.
        this.send([p]);
        return;
      }
      // The timeout runs from the call, queueing included: a decision waiting behind calls that
      // hang still gets its answer (from the failure policy) after timeoutMs, and is then dropped
      // from the queue instead of being sent late. The queue is in call order, so its deadlines
      // are too: one timer, for the oldest, serves the whole queue.
      p.deadlineMs = Date.now() + this.store.timeoutMs;
      this.queue.push(p);
      this.flush();
    });
  }

  /** Sends waiting decisions while fewer than MAX_IN_FLIGHT calls are out; times out the rest. */
  private flush(): void {
    while (this.queue.length > 0 && this.inFlight < MAX_IN_FLIGHT) {
      this.send(this.queue.splice(0, this.store.maxBatch));
    }
    if (this.queue.length === 0) {
      if (this.queueTimer !== undefined) clearTimeout(this.queueTimer);
      this.queueTimer = undefined;
    } else if (this.queueTimer === undefined && this.store.timeoutMs > 0) {
      this.queueTimer = setTimeout(() => this.expire(), Math.max(0, (this.queue[0] as Pending).deadlineMs - Date.now()));
    }
  }

  /** Rejects the waiting decisions whose timeout has ended. */
  private expire(): void {
    this.queueTimer = undefined;
    const now = Date.now();
    let k = 0;
    while (k < this.queue.length && (this.queue[k] as Pending).deadlineMs <= now) k++;
    for (const p of this.queue.splice(0, k)) p.reject(new TimeoutError(this.store.timeoutMs));
    this.flush();
  }

  /** One script call for `batch` (in order); each decision gets its slice of the reply. */
  private send(batch: Pending[]): void {
    const lone = batch[0] as Pending;
    if (this.fast && batch.length === 1 && (lone.mode === "c" || lone.mode === "p")) {
      const now = lone.nowMs ?? this.store.serverClock.now();
      if (now !== undefined) return this.sendFast(lone, now);
    }
    const keys: string[] = [];
    const args = this.head.slice();
    // Redis's time by the store's calibrated clock; "" (the script reads TIME) when a reading is due.
    const clock = this.store.serverClock;
    let server: string | undefined;
    for (const p of batch) {
      for (const k of this.keysOf(p.key)) keys.push(k);
      if (p.nowMs === undefined) server ??= String(clock.now() ?? "");
      args.push(p.mode, p.nowMs === undefined ? (server as string) : String(p.nowMs), String(p.cost));
    }
    const sentAt = clock.mark();
    const width = 5 * this.n;
    this.inFlight++;
    // Batched: the call may take only what is left of its oldest decision's timeout.
    const ms = batch[0]!.deadlineMs > 0 ? Math.max(1, batch[0]!.deadlineMs - Date.now()) : this.store.timeoutMs;
    this.store.withTimeout(this.store.run(this.script, keys, args), ms).then(
      (reply) => {
        this.inFlight--;
        this.flush();
        const n = width * batch.length;
        if (!Array.isArray(reply) || (reply.length !== n && reply.length !== n + 1)) {
          const err = new RateLimitStoreError(`RedisStore: unexpected script reply ${describeValue(reply)}`);
          for (const p of batch) p.reject(err);
          return;
        }
        const r = reply as unknown[];
        if (r.length > n) clock.reading(sentAt, Number(r[n]));
        batch.forEach((p, d) => p.resolve(r.slice(d * width, (d + 1) * width)));
      },
      (e: unknown) => {
        this.inFlight--;
        this.flush();
        for (const p of batch) p.reject(e);
      },
    );
  }

  /**
   * A lone consume or peek by the script's fast path: the reply is the state the script decided
   * on, and `check` on it gives the outcome (fast-reply.ts), passed on as the general reply's 5 integers.
   */
  private sendFast(p: Pending, now: number): void {
    const lim = this.limits[0] as ResolvedLimit;
    const args = [p.mode === "c" ? "C" : "P", String(now), String(p.cost), ...this.fastTail];
    this.inFlight++;
    const ms = p.deadlineMs > 0 ? Math.max(1, p.deadlineMs - Date.now()) : this.store.timeoutMs;
    this.store.withTimeout(this.store.run(this.script, this.keysOf(p.key), args, true), ms).then(
      (raw) => {
        this.inFlight--;
        this.flush();
        const out = this.ev.outcomes[0] as Outcome;
        try {
          fastOutcome(raw, lim, now, p.cost, out);
        } catch (e) {
          p.reject(new RateLimitStoreError(`RedisStore: unexpected script reply (${(e as Error).message})`));
          return;
        }
        p.resolve([out.allowed ? 1 : 0, out.remaining, out.retryAfterMs, out.resetAfterMs, out.delayMs]);
      },
      (e: unknown) => {
        this.inFlight--;
        this.flush();
        p.reject(e);
      },
    );
  }

  /** Builds the decision from the script's 5 integers per limit, exactly as `Evaluator.run` does. */
  private toDecision(r: readonly unknown[], cost: number): Decision {
    const outs = this.ev.outcomes;
    let allowed = true;
    for (let i = 0; i < this.n; i++) {
      const o = outs[i]!;
      o.allowed = Number(r[5 * i]) === 1;
      o.remaining = Number(r[5 * i + 1]);
      o.retryAfterMs = Number(r[5 * i + 2]);
      o.resetAfterMs = Number(r[5 * i + 3]);
      o.delayMs = Number(r[5 * i + 4]);
      if (!o.allowed) allowed = false;
    }
    return this.single ? newDecision(outs[0]!, this.limits[0]!, 0, undefined) : this.ev.combine(allowed, cost);
  }

  private insuranceStore(): BoundStore | undefined {
    const f = this.store.failure;
    if (typeof f !== "object") return undefined;
    this.insurance ??= f.insurance.bind(this.limits, this.namespace);
    return this.insurance;
  }

  /** A consume or peek that Redis did not answer: the failure policy decides. */
  private async failed(e: unknown, op: "consume" | "peek", key: string, cost: number, nowMs: number | undefined): Promise<Decision> {
    const err = this.store.report(e, { op, key, timedOut: e instanceof TimeoutError });
    const f = this.store.failure;
    if (f === "throw") throw err;
    if (typeof f === "object") {
      const ins = this.insuranceStore() as BoundStore;
      const d = await (op === "consume" ? ins.consume(key, cost, nowMs) : ins.peek(key, cost, nowMs));
      return { ...d, reason: "insurance" };
    }
    const open = f === "open";
    const waitMs = open ? 0 : FAIL_CLOSED_RETRY_MS;
    const o: Outcome = { allowed: open, remaining: 0, retryAfterMs: waitMs, resetAfterMs: waitMs, delayMs: 0 };
    return { ...newDecision(o, this.limits[0]!, 0, undefined), reason: "store-error" };
  }

  /** A refund or reset that Redis did not take: report; insurance applies it locally; "throw" rejects. */
  private async failedWrite(e: unknown, op: "refund" | "reset", key: string, local: () => void | Promise<void> | undefined): Promise<void> {
    const err = this.store.report(e, { op, key, timedOut: e instanceof TimeoutError });
    if (this.store.failure === "throw") throw err;
    await local();
  }

  private clock(nowMs: number | undefined): number {
    return nowMs ?? Date.now();
  }

  private cachedDenial(key: string, cost: number, nowMs: number | undefined): Decision | undefined {
    const hit = (this.denials as Map<string, Denial>).get(key);
    if (hit === undefined) return undefined;
    const now = this.clock(nowMs);
    if (now >= hit.untilMs || now < hit.atMs) {
      (this.denials as Map<string, Denial>).delete(key);
      return undefined;
    }
    if (cost < hit.cost) return undefined;
    const elapsed = now - hit.atMs;
    return {
      ...hit.d,
      retryAfterMs: hit.untilMs - now,
      resetAfterMs: Math.max(hit.untilMs - now, hit.d.resetAfterMs - elapsed),
      reason: "denial-cache",
    };
  }

  private remember(key: string, cost: number, nowMs: number | undefined, d: Decision): void {
    if (d.retryAfterMs <= 0) return;
    const m = this.denials as Map<string, Denial>;
    const now = this.clock(nowMs);
    m.delete(key);
    if (m.size >= this.store.denialMaxKeys) {
      // Drop the oldest entry (Map keeps insertion order).
      const first = m.keys().next();
      if (!first.done) m.delete(first.value);
    }
    m.set(key, { untilMs: now + d.retryAfterMs, cost, atMs: now, d });
  }
}
