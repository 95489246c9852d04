/**
 * RedisStore: the Redis connection's whole life for every limiter bound to it (lanes, breaker and
 * probes, backpressure, the degraded ledgers, the instance registry, close). Longer than our
 * ~350-line guide on purpose: these share one state machine per lane, and splitting them would
 * spread one transition over several files. The per-limiter work is in table.ts, the wire in
 * lanes.ts and batcher.ts, the fallbacks in degraded.ts and without-redis.ts.
 */
import { RateLimitStoreError } from "../../core/errors.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BindOptions, BoundLeases, BoundStore, Store } from "../../store.js";
import { LeasedTable } from "../leased-table.js";
import { MemoryStore } from "../memory.js";
import { isNoScript, type RedisShim } from "./client.js";
import { InstanceRegistry } from "./instances.js";
import { Lanes, RedisDownError, RedisTimeoutError, type Lane, type WaitingCall } from "./lanes.js";
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

/** A trivial script to ask whether a lane's master answers again (routed by its key). */
const PROBE = "return 1";

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
 * Keys: `<prefix>{<namespace>:<key>}:<limit index>`; the braces are a Redis Cluster hash tag, so
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
  private registry: InstanceRegistry | undefined;
  private local: MemoryStore | undefined;
  /** Limiters holding admissions made while degraded, to charge to Redis when it answers again. */
  private readonly ledgers = new Set<RedisTable>();
  /** Limiters with quota leasing, whose blocks {@link RedisStore.close} gives back. */
  private readonly leased = new Set<LeasedTable>();
  /** @internal Redis's time, kept calibrated against TIME (server-clock.ts). */
  readonly serverClock = new ServerClock();
  private waiting = 0;
  private overloaded = 0;
  private aggregate: BreakerState = "closed";

  constructor(options: RedisStoreOptions) {
    this.opts = resolveRedisOptions(options);
    this.prefix = this.opts.prefix;
    this.timeoutMs = this.opts.timeoutMs;
    this.failure = this.opts.failure;
    this.minTtlMs = this.opts.minTtlMs;
    this.lanes = new Lanes(this.opts.shim.isCluster, this.timeoutMs, (lane) => this.stalled(lane));
    // Fail at construction, not on the first decision, if the scripts did not ship.
    loadScript("ratekeeper", []);
  }

  bind(limits: readonly ResolvedLimit[], namespace: string, options?: BindOptions): BoundStore {
    this.joinRegistry();
    const table = new RedisTable(this, limits, namespace);
    const lease = options?.lease;
    if (lease === undefined) return table;
    const lim = limits[0] as ResolvedLimit;
    const leased = new LeasedTable(lim, new RedisBlockSource(this, lim, namespace, lease), table, lease);
    this.leased.add(leased);
    return leased;
  }

  /** A concurrency limit's leases in Redis (leases.ts, scripts/concurrency.lua). */
  bindLeases(limit: number, namespace: string): BoundLeases {
    return new RedisLeases(this, limit, namespace);
  }

  /** The circuit breaker's state: `closed` while Redis answers. */
  get state(): BreakerState {
    return this.aggregate;
  }

  /** Counters for metrics and readiness. */
  stats(): RedisStoreStats {
    return {
      state: this.aggregate,
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
   * `lease`), stops the instance heartbeat and leaves the registry. Never closes the client.
   */
  async close(): Promise<void> {
    await Promise.all([...[...this.leased].map((t) => t.close()), this.registry?.close()]);
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
  localStore(): Store {
    this.local ??= new MemoryStore({ maxKeys: 100_000 });
    return this.local;
  }

  /** @internal Opens the breaker at once when the client reports its connection lost (single Redis). */
  checkConnection(): void {
    if (this.opts.shim.isCluster || !this.opts.shim.lost()) return;
    const lane = this.lanes.of("");
    if (lane.breaker.state === "closed") this.transition(lane, lane.breaker.failed(true, performance.now()), "connection lost");
  }

  /** @internal A decision starts waiting for Redis; false when `maxPending` are already waiting (backpressure). */
  enter(): boolean {
    if (this.waiting >= this.opts.maxPending) {
      this.overloaded++;
      return false;
    }
    this.waiting++;
    return true;
  }

  /** @internal A decision has its answer. */
  leave(): void {
    this.waiting--;
  }

  /** @internal A limiter holds admissions to reconcile when its lane answers again. */
  holdsLedger(table: RedisTable): void {
    this.ledgers.add(table);
  }

  /** @internal A limiter's ledger is empty again. */
  ledgerEmpty(table: RedisTable): void {
    this.ledgers.delete(table);
  }

  /**
   * @internal Runs a script on `lane`: EVALSHA, then, when the server lacks it (first use, restart,
   * failover, new node), EVAL. Of the calls that meet NOSCRIPT on a lane at once, one sends EVAL
   * (which also caches the script); the others wait for it and retry EVALSHA, so a burst does not
   * send the script's text hundreds of times. A NOSCRIPT reply is a reply: the lane progresses.
   */
  async run(lane: Lane, script: LoadedScript, keys: string[], args: string[], buffers = false): Promise<unknown> {
    const shim = this.opts.shim;
    const evalsha: RedisShim["evalsha"] = (sha, k, a) => (buffers ? shim.evalshaBuffer!(sha, k, a) : shim.evalsha(sha, k, a));
    const evalScript: RedisShim["eval"] = (src, k, a) => (buffers ? shim.evalBuffer!(src, k, a) : shim.eval(src, k, a));
    try {
      return await evalsha(script.sha, keys, args);
    } catch (e) {
      if (!isNoScript(e)) throw e;
    }
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
    if (lane.breaker.state !== "closed") return Promise.reject(new RedisDownError());
    lane.probeKey = keys[0] as string;
    return this.exchange(lane, () => this.run(lane, script, keys, args), 1, onLate);
  }

  /**
   * @internal One call to Redis on `lane`, watched by the lane's watchdog: it rejects with a
   * RedisTimeoutError when the lane stalls. A reply that arrives after that goes to `onLate`
   * (to give back what it charged). Every reply, early or late, tells the breaker Redis answers.
   */
  exchange<T>(lane: Lane, send: () => Promise<T>, decisions: number, onLate?: (value: T) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let answered = false;
      const call: WaitingCall = {
        abandon(error) {
          if (answered) return;
          answered = true;
          reject(error);
        },
      };
      this.lanes.begin(lane, call);
      const t0 = performance.now();
      send().then(
        (value) => {
          this.lanes.end(lane, call);
          this.roundTrip(performance.now() - t0, decisions);
          this.transition(lane, lane.breaker.succeeded(), "Redis answered");
          if (answered) {
            if (onLate) onLate(value);
            return;
          }
          answered = true;
          resolve(value);
        },
        (e: unknown) => {
          this.lanes.end(lane, call);
          if (answered) return;
          answered = true;
          this.transition(lane, lane.breaker.failed(false, performance.now()), e instanceof Error ? e.message : String(e));
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
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

  private roundTrip(ms: number, decisions: number): void {
    const f = this.opts.onRoundTrip;
    if (f === undefined) return;
    try {
      f(ms, decisions);
    } catch {
      /* a failing observer must not fail the decision */
    }
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

  /** The lane's watchdog timed its calls out: Redis is down for it. */
  private stalled(lane: Lane): void {
    this.transition(lane, lane.breaker.failed(true, performance.now()), `no reply for ${this.timeoutMs} ms`);
  }

  /** Applies a breaker change: the probe schedule, reconciliation, and the store-wide state and its event. */
  private transition(lane: Lane, to: BreakerState | undefined, cause: string): void {
    if (to === undefined) return;
    if (to === "open") this.scheduleProbe(lane);
    if (to === "closed") for (const t of [...this.ledgers]) void t.reconcile(lane);
    const lanes = this.lanes.all();
    const next: BreakerState = lanes.some((l) => l.breaker.state === "open")
      ? "open"
      : lanes.some((l) => l.breaker.state === "half-open")
        ? "half-open"
        : "closed";
    if (next === this.aggregate) return;
    const from = this.aggregate;
    this.aggregate = next;
    const f = this.opts.onStateChange;
    if (f === undefined) return;
    try {
      f({ from, to: next, cause });
    } catch {
      /* a failing observer must not break the breaker */
    }
  }

  /** After the open breaker's pause, goes half-open and sends one probe on the lane. */
  private scheduleProbe(lane: Lane): void {
    if (lane.probing) return;
    lane.probing = true;
    const t = setTimeout(
      () => {
        lane.probing = false;
        if (!lane.breaker.probe()) return;
        this.transition(lane, "half-open", "probing");
        const key = lane.probeKey || `${this.prefix}probe`;
        this.exchange(lane, () => this.opts.shim.eval(PROBE, [key], []), 0).then(
          () => undefined, // exchange closed the breaker
          () => undefined, // exchange (or the watchdog) opened it again, which schedules the next probe
        );
      },
      Math.max(0, lane.breaker.probeAtMs - performance.now()),
    );
    t.unref?.();
  }
}

export { RedisDownError, RedisTimeoutError };
