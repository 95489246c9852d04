import type { Decision } from "../../core/decision.js";
import { RateLimitStoreError } from "../../core/errors.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BoundStore, ClockOptions } from "../../store.js";
import { DegradedLimiter } from "./degraded.js";
import { RedisDownError, RedisTimeoutError } from "./lanes.js";
import type { RedisStore } from "./store.js";
import type { RedisTable } from "./table.js";
import { decideByPolicy, type DecisionCall } from "./without-redis.js";

/**
 * What answers one limiter's calls that Redis did not: the store's failure policy, with the
 * local store it may need (the insurance store's binding, or the degraded limiter and its ledger
 * of what it admitted, which the table charges to Redis once it answers again).
 */
export class TableFallback {
  private insurance: BoundStore | undefined;
  /** The degraded limiter, once the policy needed it. */
  degraded: DegradedLimiter | undefined;

  /**
   * @param laneKey the first Redis key of a user key (its lane)
   * @param clock `{ injectedClock: true }` when the limiter injects its clock: the local stores
   *   then decide on its times, so they are bound with it (a memory store's sweep timer, on the
   *   process clock, must not drop what is live on the injected one)
   */
  constructor(
    private readonly store: RedisStore,
    private readonly table: RedisTable,
    private readonly limits: readonly ResolvedLimit[],
    private readonly namespace: string,
    private readonly laneKey: (key: string) => string,
    private readonly clock?: ClockOptions,
  ) {}

  /** The local store that stands in while Redis is down, when the policy has one (insurance, degraded). */
  local(): BoundStore | DegradedLimiter | undefined {
    const f = this.store.failure;
    if (typeof f === "object") {
      this.insurance ??= this.clock
        ? f.insurance.bind(this.limits, this.namespace, this.clock)
        : f.insurance.bind(this.limits, this.namespace);
      return this.insurance;
    }
    if (f === "degraded") {
      this.degraded ??= new DegradedLimiter(
        this.limits,
        this.namespace,
        () => this.store.localStore(),
        () => this.store.instances(),
        this.clock,
      );
      return this.degraded;
    }
    return undefined;
  }

  /** A consume or peek that Redis did not answer: the failure policy decides. */
  async decision(e: unknown, call: DecisionCall): Promise<Decision> {
    const err = this.failure(e, call.op, call.key);
    const local = () => this.local() as BoundStore | DegradedLimiter;
    const d = await decideByPolicy(this.store.failure, err, this.limits, local, call);
    // What the degraded limiter admitted is charged to Redis once it answers again.
    if (d.reason === "degraded" && call.op === "consume" && d.allowed) {
      this.store.holdsLedger(this.table);
      this.store.reconcileSoon(this.store.lanes.of(this.laneKey(call.key)));
    }
    return d;
  }

  /** A refund or reset that Redis did not take: report; a local store applies it; "throw" rejects. */
  async write(e: unknown, op: "refund" | "reset", key: string, local: () => void | Promise<void> | undefined): Promise<void> {
    // Reported (onError) whatever the policy, as docs/redis.md's table says (not while the breaker is open).
    const err = this.failure(e, op, key);
    if (this.store.failure === "throw") throw err();
    await local();
  }

  /** Forgets `key` in the local stores (a reset: they may hold state from an outage). */
  async reset(key: string): Promise<void> {
    await this.insurance?.reset(key);
    await this.degraded?.reset(key);
  }

  /**
   * The error of a call Redis did not take, for a `"throw"` caller. A call that failed is
   * reported now (`onError`), and its error is made for that. While the breaker is open no call
   * is made, and nothing is reported (the breaker's opening was, once): only a `"throw"` caller
   * sees an error then, so it is made only for them, a new one for each.
   */
  private failure(e: unknown, op: "consume" | "peek" | "refund" | "reset", key: string): () => RateLimitStoreError {
    if (e instanceof RedisDownError) return () => new RateLimitStoreError(e.message, { cause: e });
    const err = this.store.report(e, { op, key, timedOut: e instanceof RedisTimeoutError });
    return () => err;
  }
}
