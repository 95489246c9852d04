/**
 * RedisStore: the Redis connection's life for every limiter bound to it (binding, scripts,
 * backpressure, the degraded ledgers, the instance registry, ping, close). The per-limiter work
 * is in table.ts; the lanes' breakers, their watchdog and probes in breakers.ts (each breaker's
 * state machine in breaker.ts); the wire in lanes.ts and batcher.ts; the fallbacks in degraded.ts
 * and without-redis.ts.
 */
import { RateLimitStoreError } from "../../core/errors.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BindOptions, BoundLeases, BoundStore, ClockOptions, Store } from "../../store.js";
import { LeasedTable } from "../leased-table.js";
import { MemoryStore } from "../memory.js";
import { isNoScript, type RedisShim } from "./client.js";
import { CLOSE_WAIT_MS, settleWithin } from "./close-wait.js";
import { InstanceRegistry } from "./instances.js";
import { Breakers, PROBE } from "./breakers.js";
import { RedisDownError, redisDown, RedisTimeoutError, type Lane, type Lanes } from "./lanes.js";
import { RedisBlockSource } from "./lease-source.js";
import { RedisLeases } from "./leases.js";
import {
  resolveRedisOptions,
  type BreakerState,
  type RedisErrorContext,
  type RedisFailurePolicy,
  type RedisStoreOptions,
  type ResolvedRedisOptions,
} from "./options.js";
import type { LoadedScript } from "./scripts.js";
import { loadScript } from "./scripts.js";
import { ServerClock } from "./server-clock.js";
import { RedisTable } from "./table.js";
import { clockOf } from "./without-redis.js";

export type { RedisStoreOptions, RedisFailurePolicy, RedisErrorContext, BreakerState, BreakerEvent } from "./options.js";

/** What a {@link RedisStore} reports about itself, for metrics, readiness and dashboards. */
export interface RedisStoreStats {
  /** The circuit breaker: `open` when Redis (or, on a cluster, any slot in use) is down. */
  readonly state: BreakerState;
  /** Decisions waiting for Redis now (queued or sent). */
  readonly pending: number;
  /** Decisions denied by backpressure (`reason: "overloaded"`) since the store was made. */
  readonly overloaded: number;
  /** The instance count the `"degraded"` policy divides limits by (the option, or the live count last seen). */
  readonly instances: number;
  /** Units admitted while degraded that could not be remembered for reconciliation. */
  readonly unreconciled: number;
}

/** @internal What a limiter did without Redis, handed to Redis lane by lane when it answers again. */
export interface Ledger {
  reconcile(lane: Lane): Promise<void>;
  /** Units admitted without Redis that could not be remembered (for {@link RedisStoreStats}). */
  readonly unrecorded: number;
}

/** How soon admissions made while a lane's breaker stayed closed are charged to Redis (ms). */
const RECONCILE_SOON_MS = 100;

/**
 * The Redis store: exact across any number of app servers. One Lua script call (EVALSHA, EVAL on
 * NOSCRIPT) per decision, every limit of the key included, all-or-nothing; the Lua mirrors
 * `core/algorithms` exactly. Time is Redis's own clock (`TIME`) unless the limiter injects one.
 *
 * While Redis answers, every decision is Redis's, however busy this process is: the timeout
 * counts only Redis's silence (see `timeoutMs`), and a backlog is bounded by `maxPending`
 * (denials with `reason: "overloaded"`), never by the failure policy. When Redis goes silent or
 * fails, a circuit breaker opens: the failure policy (`"degraded"` by default) answers at once,
 * and a probe every 100-500 ms closes the breaker as soon as Redis answers again. A reply that
 * comes back after the policy answered is given back (refunded), so nothing is counted twice.
 *
 * Keys: `<prefix>{<namespace>:<key>}:<limit index>` (a namespace's `:` and `%` written `%3A`, `%25`:
 * key-part.ts); the braces are a Redis Cluster hash tag, so
 * every key of one decision sits in one slot. Every key written gets a TTL.
 * @example
 * import { Redis } from "ioredis";
 * import { RateLimiter } from "ratekeeper";
 * import { RedisStore } from "ratekeeper/redis";
 * const store = new RedisStore({ client: new Redis(process.env.REDIS_URL) });
 * const limiter = new RateLimiter({ algorithm: "sliding-window", limit: 100, window: "1m", store });
 */
export class RedisStore implements Store {
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly failure: RedisFailurePolicy;
  readonly minTtlMs: number;
  /** @internal */
  readonly opts: ResolvedRedisOptions;
  /** @internal */
  readonly lanes: Lanes;
  /** @internal The lanes' breakers, driven by every call (breakers.ts). */
  readonly breakers: Breakers;
  private registry: InstanceRegistry | undefined;
  private local: MemoryStore | undefined;
  /**
   * What was done without Redis and must be handed to it when it answers again: admissions of
   * degraded limiters (to charge), leases granted locally (to count there).
   */
  private readonly ledgers = new Set<Ledger>();
  /** Limiters with quota leasing, whose blocks {@link RedisStore.close} gives back. */
  private readonly leased = new Set<LeasedTable>();
  /** @internal Redis's time, kept calibrated against TIME (server-clock.ts). */
  readonly serverClock = new ServerClock();
  private waiting = 0;
  private overloaded = 0;

  constructor(options: RedisStoreOptions) {
    this.opts = resolveRedisOptions(options);
    this.prefix = this.opts.prefix;
    this.timeoutMs = this.opts.timeoutMs;
    this.failure = this.opts.failure;
    this.minTtlMs = this.opts.minTtlMs;
    // A lane that answers again: charge Redis with what the degraded limiter admitted without it.
    this.breakers = new Breakers(this.opts, (lane) => {
      for (const t of [...this.ledgers]) void t.reconcile(lane);
    });
    this.lanes = this.breakers.lanes;
    // Fail at construction, not on the first decision, if the scripts did not ship.
    loadScript("ratekeeper", []);
  }

  bind(limits: readonly ResolvedLimit[], namespace: string, options?: BindOptions): BoundStore {
    this.joinRegistry();
    const table = new RedisTable(this, limits, namespace, clockOf(options));
    const lease = options?.lease;
    if (lease === undefined) return table;
    const lim = limits[0] as ResolvedLimit;
    const leased = new LeasedTable(lim, new RedisBlockSource(this, lim, namespace, lease), table, lease);
    this.leased.add(leased);
    return leased;
  }

  /** A concurrency limit's leases in Redis (leases.ts, scripts/concurrency.lua). */
  bindLeases(limit: number, namespace: string, options?: ClockOptions): BoundLeases {
    return new RedisLeases(this, limit, namespace, clockOf(options));
  }

  /** The circuit breaker's state: `closed` while Redis answers. */
  get state(): BreakerState {
    return this.breakers.state;
  }

  /** Counters for metrics and readiness. */
  stats(): RedisStoreStats {
    return {
      state: this.breakers.state,
      pending: this.waiting,
      overloaded: this.overloaded,
      instances: this.instances(),
      unreconciled: [...this.ledgers].reduce((n, t) => n + t.unrecorded, 0),
    };
  }

  /**
   * Asks Redis whether it answers (a trivial script on the instance registry's key), through the
   * same watchdog and breaker as decisions: resolves true on a reply; false when it fails, times
   * out, or the breaker is open (an open breaker's own probe decides when it closes). Use it to
   * notice a frozen Redis with no traffic (a readiness check calls it every half second).
   * Never rejects.
   */
  async ping(): Promise<boolean> {
    this.joinRegistry();
    const key = `${this.prefix}instances`;
    const lane = this.lanes.of(key);
    if (lane.breaker.state !== "closed") return false;
    lane.probeKey ||= key;
    try {
      await this.exchange(lane, () => this.opts.shim.eval(PROBE, [key], []), 0);
      return true;
    } catch (e) {
      if (!(e instanceof RedisTimeoutError)) this.report(e, { op: "heartbeat", key: "", timedOut: false });
      return false;
    }
  }

  /**
   * Call when the process stops: gives back every unit held in leased blocks (RateLimiter option
   * `lease`), stops the instance heartbeat and leaves the registry, and stops the sweep timer of
   * the `"degraded"` policy's own memory store. Never closes the client. Waits for Redis at most
   * 2 s (close-wait.ts), then resolves, so a shutdown never hangs on a silent Redis (`timeoutMs: 0`
   * and a frozen server): units not given back stay counted until their window ends, the registry
   * entry expires in 15 s; drop the calls still waiting with the client's `disconnect()`.
   */
  async close(): Promise<void> {
    this.local?.close();
    await settleWithin(Promise.all([...[...this.leased].map((t) => t.close()), this.registry?.close()]), CLOSE_WAIT_MS);
  }

  /**
   * Counts this process among the live instances (whatever its failure policy: every instance
   * takes from the same limits while Redis answers), from first use on; not when `instances` is set.
   */
  private joinRegistry(): void {
    if (this.opts.instances === 0) this.instanceRegistry().start();
  }

  /** @internal N for the `"degraded"` policy. */
  instances(): number {
    return this.opts.instances > 0 ? this.opts.instances : (this.registry?.count ?? 1);
  }

  /** @internal The memory store the `"degraded"` policy keeps its shares in (made on first need). */
  localStore(): MemoryStore {
    this.local ??= new MemoryStore({ maxKeys: 100_000 });
    return this.local;
  }

  /** @internal Opens the breaker at once when the client reports its connection lost (single Redis). */
  checkConnection(): void {
    this.breakers.checkConnection();
  }

  /**
   * @internal A decision starts waiting for Redis; false when `maxPending` are already waiting
   * (backpressure), counted in {@link RedisStoreStats} unless `quiet` (the caller's fallback counts it).
   */
  enter(quiet = false): boolean {
    if (this.waiting >= this.opts.maxPending) {
      if (!quiet) this.overloaded++;
      return false;
    }
    this.waiting++;
    return true;
  }

  /** @internal A decision has its answer. */
  leave(): void {
    this.waiting--;
  }

  /** @internal A limiter holds admissions (or leases) to reconcile when its lane answers again. */
  holdsLedger(table: Ledger): void {
    this.ledgers.add(table);
  }

  /**
   * @internal The `"degraded"` policy admitted on `lane` (or a local policy granted a lease there),
   * or a reconciliation there failed. A closing breaker reconciles; but a call can fail without
   * the breaker opening (one error of a few in a row, as a Cluster gives for a slot whose master
   * just died), and then nothing would close it: reconcile shortly if the breaker is still closed
   * then.
   */
  reconcileSoon(lane: Lane): void {
    if (lane.reconcileQueued) return;
    lane.reconcileQueued = true;
    const t = setTimeout(() => {
      lane.reconcileQueued = false;
      if (lane.breaker.state === "closed") for (const table of [...this.ledgers]) void table.reconcile(lane);
    }, RECONCILE_SOON_MS);
    t.unref?.();
  }

  /** @internal A limiter's ledger is empty again. */
  ledgerEmpty(table: Ledger): void {
    this.ledgers.delete(table);
  }

  /**
   * @internal Runs a script on `lane`: EVALSHA, then, when the server lacks it (first use, restart,
   * failover, new node), EVAL. Of the calls that meet NOSCRIPT on a lane at once, one sends EVAL
   * (which also caches the script); the others wait for it and retry EVALSHA, so a burst does not
   * send the script's text hundreds of times. A NOSCRIPT reply is a reply: the lane progresses.
   */
  run(lane: Lane, script: LoadedScript, keys: string[], args: string[], buffers = false): Promise<unknown> {
    const shim = this.opts.shim;
    // The common case, with no async frame or closure per call: EVALSHA answers.
    const first = buffers ? shim.evalshaBuffer!(script.sha, keys, args) : shim.evalsha(script.sha, keys, args);
    return first.then(undefined, (e: unknown) =>
      isNoScript(e) ? this.runLoading(lane, script, keys, args, buffers) : Promise.reject(e instanceof Error ? e : new Error(String(e))),
    );
  }

  /** @internal {@link RedisStore.run} after a NOSCRIPT reply: one EVAL per lane and script, the others wait for it. */
  async runLoading(lane: Lane, script: LoadedScript, keys: string[], args: string[], buffers: boolean): Promise<unknown> {
    const shim = this.opts.shim;
    const evalsha: RedisShim["evalsha"] = (sha, k, a) => (buffers ? shim.evalshaBuffer!(sha, k, a) : shim.evalsha(sha, k, a));
    const evalScript: RedisShim["eval"] = (src, k, a) => (buffers ? shim.evalBuffer!(src, k, a) : shim.eval(src, k, a));
    this.lanes.progress(lane);
    const loading = lane.loading.get(script.sha);
    if (loading === undefined) {
      const mine = evalScript(script.source, keys, args);
      const done = mine.then(
        () => undefined,
        () => undefined,
      );
      lane.loading.set(script.sha, done);
      void done.then(() => lane.loading.delete(script.sha));
      return await mine;
    }
    await loading;
    try {
      return await evalsha(script.sha, keys, args);
    } catch (e) {
      if (!isNoScript(e)) throw e;
      return await evalScript(script.source, keys, args);
    }
  }

  /**
   * @internal One script call outside a limiter's table (leases, quota blocks): on the lane of
   * `keys[0]`, watched like every call; rejects at once while that lane's breaker is open. A reply
   * that comes after the call was timed out goes to `onLate` (to undo what it did).
   */
  ask(script: LoadedScript, keys: string[], args: string[], onLate?: (reply: unknown) => void): Promise<unknown> {
    const lane = this.lanes.of(keys[0] as string);
    if (lane.breaker.state !== "closed") return Promise.reject(redisDown());
    lane.probeKey = keys[0] as string;
    return this.exchange(lane, () => this.run(lane, script, keys, args), 1, onLate);
  }

  /** @internal One call to Redis on `lane`, watched by its watchdog and driving its breaker: see {@link Breakers.exchange}. */
  exchange<T>(lane: Lane, send: () => Promise<T>, decisions: number, onLate?: (value: T) => void): Promise<T> {
    return this.breakers.exchange(lane, send, decisions, onLate);
  }

  /** @internal Wraps and reports a failure; never throws. */
  report(cause: unknown, ctx: RedisErrorContext): RateLimitStoreError {
    const what = cause instanceof Error ? cause.message : String(cause);
    const err = new RateLimitStoreError(`RedisStore ${ctx.op}${ctx.key ? ` "${ctx.key}"` : ""}: ${what}`, { cause });
    const onError = this.opts.onError;
    if (onError) {
      try {
        onError(err, ctx);
      } catch {
        /* a failing error handler must not turn a store failure into a crash */
      }
    }
    return err;
  }

  private instanceRegistry(): InstanceRegistry {
    if (this.registry === undefined) {
      const key = `${this.prefix}instances`;
      const lane = this.lanes.of(key);
      this.registry = new InstanceRegistry(key, (script, k, args) => {
        if (lane.breaker.state !== "closed") return Promise.reject(new Error("Redis is down"));
        lane.probeKey ||= k;
        return this.exchange(lane, () => this.run(lane, script, [k], args), 0);
      });
    }
    return this.registry;
  }
}

export { RedisDownError, RedisTimeoutError };
