import type { Decision } from "../../core/decision.js";
import { describeValue, RateLimitConfigError, RateLimitStoreError } from "../../core/errors.js";
import { MAX_TIMER_MS } from "../../core/max-timer.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BindOptions, BoundStore, ClockOptions, Store } from "../../store.js";
import { ScriptFormat } from "../redis/script-format.js";
import { foreignMarker, foreignValueError } from "../redis/foreign-value.js";
import { clockOf, decideByPolicy, type DecisionCall } from "../redis/without-redis.js";
import { scriptSource, SECTIONS_OF, type ScriptSource } from "../redis/script-source.js";
import {
  resolveHttpRedisOptions,
  type HttpRedisErrorContext,
  type HttpRedisFailurePolicy,
  type HttpRedisStoreOptions,
  type ResolvedHttpRedisOptions,
} from "./options.js";

export type { HttpRedisStoreOptions, HttpRedisFailurePolicy, HttpRedisErrorContext, HttpRedisClientLike } from "./options.js";

/** What a denial by the `"closed"` policy says to retry after. */

/** No reply within `timeoutMs`. */
class HttpRedisTimeoutError extends Error {
  constructor(ms: number) {
    super(`no reply from Redis within ${ms} ms`);
  }
}

/** Whether a Redis error says the script is not in the server's script cache. */
function isNoScript(err: unknown): boolean {
  return (err instanceof Error ? err.message : String(err)).includes("NOSCRIPT");
}

/** SHA1 of a script's text in hex, by Web Crypto (every runtime has it; no node:crypto). */
async function sha1(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The Redis store for HTTP clients (`@upstash/redis`), for the edge: Cloudflare Workers (with or
 * without `nodejs_compat`), Vercel Edge, Deno Deploy, Bun, and Node too. Exact across every
 * isolate and server sharing the Redis: each decision is one call of the same Lua script as
 * `RedisStore` (EVALSHA, EVAL on NOSCRIPT), on the same keys, so edge functions and Node servers
 * on one Redis (with the same `prefix`) share each key's state. Time is Redis's clock (`TIME`, in
 * the script) unless the limiter injects one: the edge's own clock may be frozen during a
 * request (Workers) or skewed between locations.
 *
 * Unlike `RedisStore` it keeps nothing between calls: no timers, no batching across requests, no
 * circuit breaker, no connection state (Workers forbid timers outside a request and I/O shared
 * between requests). Each call has its own timeout; when Redis fails, `failure` answers.
 * @example
 * import { Redis } from "@upstash/redis";
 * import { RateLimiter } from "ratekeeper";
 * import { HttpRedisStore } from "ratekeeper/redis-http";
 * const store = new HttpRedisStore({ client: new Redis({ url, token }) });
 * const limiter = new RateLimiter({ algorithm: "sliding-window", limit: 100, window: "1m", store });
 */
export class HttpRedisStore implements Store {
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly failure: HttpRedisFailurePolicy;
  /** @internal */
  readonly opts: ResolvedHttpRedisOptions;
  private readonly shas = new Map<string, Promise<string>>();

  constructor(options: HttpRedisStoreOptions) {
    this.opts = resolveHttpRedisOptions(options);
    this.prefix = this.opts.prefix;
    this.timeoutMs = this.opts.timeoutMs;
    this.failure = this.opts.failure;
  }

  /** @throws RateLimitConfigError for quota leasing (`lease`), which needs a process that lives on. */
  bind(limits: readonly ResolvedLimit[], namespace: string, options?: BindOptions): BoundStore {
    if (options?.lease !== undefined) {
      throw new RateLimitConfigError([
        {
          path: "lease",
          message: "is not available with HttpRedisStore (blocks outlive requests, which edge isolates do not): leave it out",
        },
      ]);
    }
    return new HttpRedisTable(this, limits, namespace, clockOf(options));
  }

  /**
   * @internal Runs a script: EVALSHA, then EVAL when the server lacks it (first use, restart,
   * failover), within `timeoutMs`. A reply that arrives after the timeout goes to `onLate`.
   */
  run(script: ScriptSource, keys: string[], args: string[], onLate?: (reply: unknown) => void): Promise<unknown> {
    const client = this.opts.client;
    const send = async (): Promise<unknown> => {
      const sha = await this.shaOf(script);
      try {
        return await client.evalsha(sha, keys, args);
      } catch (e) {
        if (!isNoScript(e)) throw e;
      }
      return await client.eval(script.source, keys, args);
    };
    const ms = this.timeoutMs;
    if (ms === 0) return send();
    return new Promise((resolve, reject) => {
      let answered = false;
      // At most what a timer holds (about 24.8 days): a longer one would fire after 1 ms.
      const timer = setTimeout(
        () => {
          answered = true;
          reject(new HttpRedisTimeoutError(ms));
        },
        Math.min(ms, MAX_TIMER_MS),
      );
      send().then(
        (reply) => {
          clearTimeout(timer);
          if (!answered) resolve(reply);
          else onLate?.(reply);
          answered = true;
        },
        (e: unknown) => {
          clearTimeout(timer);
          if (!answered) reject(e instanceof Error ? e : new Error(String(e)));
          answered = true;
        },
      );
    });
  }

  /** @internal Wraps and reports a failure; never throws. */
  report(cause: unknown, op: HttpRedisErrorContext["op"], key: string): RateLimitStoreError {
    const what = cause instanceof Error ? cause.message : String(cause);
    const err = new RateLimitStoreError(`HttpRedisStore ${op} "${key}": ${what}`, { cause });
    try {
      this.opts.onError?.(err, { op, key, timedOut: cause instanceof HttpRedisTimeoutError });
    } catch {
      /* a failing error handler must not turn a store failure into a crash */
    }
    return err;
  }

  private shaOf(script: ScriptSource): Promise<string> {
    let sha = this.shas.get(script.name);
    if (sha === undefined) {
      sha = sha1(script.source);
      this.shas.set(script.name, sha);
    }
    return sha;
  }
}

/** One limiter's view of an {@link HttpRedisStore}. */
class HttpRedisTable implements BoundStore {
  private readonly format: ScriptFormat;
  private readonly script: ScriptSource;
  /** Whether a limit shapes (leaky bucket `mode: "shape"`): then each call carries the caller's longest wait. */
  private readonly shapes: boolean;
  private insurance: BoundStore | undefined;

  constructor(
    private readonly store: HttpRedisStore,
    private readonly limits: readonly ResolvedLimit[],
    private readonly namespace: string,
    /** `{ injectedClock: true }` when the limiter injects its clock: the insurance store is bound with it. */
    private readonly clock: ClockOptions | undefined,
  ) {
    this.format = new ScriptFormat(limits, store.prefix, namespace, store.opts.minTtlMs);
    this.shapes = limits.some((l) => l.shape);
    this.script = scriptSource(
      "ratekeeper",
      limits.flatMap((l) => SECTIONS_OF[l.algorithm] ?? []),
    );
  }

  consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Promise<Decision> {
    return this.format.refuseCost(cost) ?? this.decide({ op: "consume", key, cost, nowMs, maxDelayMs });
  }

  peek(key: string, cost: number, nowMs: number | undefined): Promise<Decision> {
    return this.format.refuseCost(cost) ?? this.decide({ op: "peek", key, cost, nowMs, maxDelayMs: undefined });
  }

  async refund(key: string, cost: number, nowMs: number | undefined): Promise<void> {
    try {
      await this.call("r", key, cost, nowMs);
    } catch (e) {
      const err = this.store.report(e, "refund", key);
      if (this.store.failure === "throw") throw err;
      await this.insuranceStore()?.refund(key, cost, nowMs);
    }
  }

  async reset(key: string): Promise<void> {
    try {
      await this.call("x", key, 1, undefined);
    } catch (e) {
      const err = this.store.report(e, "reset", key);
      if (this.store.failure === "throw") throw err;
    }
    await this.insuranceStore()?.reset(key);
  }

  private async decide(call: DecisionCall): Promise<Decision> {
    const { op, key, cost, nowMs, maxDelayMs } = call;
    const mode = op === "consume" ? "c" : "p";
    let reply: readonly unknown[];
    try {
      reply = await this.call(mode, key, cost, nowMs, maxDelayMs);
    } catch (e) {
      return this.failed(e, call);
    }
    return this.format.decision(reply, cost);
  }

  /**
   * One decision (or refund, or reset) as one script call; its 5 integers per limit. Time: the
   * injected clock's, else "" (the script reads Redis's TIME and appends it to the reply). With a
   * shaping limit, the caller's longest wait too ("" for no bound), as ratekeeper.lua's header says.
   */
  private async call(
    mode: "c" | "p" | "r" | "x",
    key: string,
    cost: number,
    nowMs: number | undefined,
    maxDelayMs?: number,
  ): Promise<readonly unknown[]> {
    const keys = mode === "x" ? [...this.format.keysOf(key), ...this.format.resetKeysOf(key)] : this.format.keysOf(key);
    const args = [...this.format.head, mode, nowMs === undefined ? "" : String(nowMs), String(cost)];
    if (this.shapes) args.push(maxDelayMs === undefined ? "" : String(maxDelayMs));
    const n = 5 * this.format.n;
    const valid = (r: unknown): r is unknown[] => Array.isArray(r) && (r.length === n || r.length === n + 1) && r.every(isInteger);
    // A consume that admitted after its caller was answered by the failure policy charged Redis for
    // a request decided otherwise: give it back, so nothing is counted twice.
    const onLate =
      mode === "c"
        ? (late: unknown) => {
            if (!valid(late) || !this.admitted(late)) return;
            this.call("r", key, cost, nowMs).catch((e: unknown) => this.store.report(e, "refund", key));
          }
        : undefined;
    const reply = await this.store.run(this.script, keys, args, onLate);
    const bad = Array.isArray(reply) ? foreignMarker(reply[0]) : undefined;
    if (bad !== undefined) throw foreignValueError(bad);
    if (!valid(reply)) throw new RateLimitStoreError(`HttpRedisStore: unexpected script reply ${describeValue(reply)}`);
    return reply;
  }

  private admitted(reply: readonly unknown[]): boolean {
    for (let i = 0; i < this.format.n; i++) if (Number(reply[5 * i]) !== 1) return false;
    return true;
  }

  private insuranceStore(): BoundStore | undefined {
    const f = this.store.failure;
    if (typeof f !== "object") return undefined;
    this.insurance ??= this.clock
      ? f.insurance.bind(this.limits, this.namespace, this.clock)
      : f.insurance.bind(this.limits, this.namespace);
    return this.insurance;
  }

  /** A consume or peek that Redis did not answer: the failure policy decides. */
  private async failed(e: unknown, call: DecisionCall): Promise<Decision> {
    const err = this.store.report(e, call.op, call.key);
    const local = () => this.insuranceStore() as BoundStore;
    return decideByPolicy(this.store.failure, () => err, this.limits, local, call);
  }
}

/**
 * A script reply's element: an integer, or its decimal text (HTTP clients may hand numbers over as
 * strings); anything else (a proxy's error page decoded, another script's reply) would become
 * NaN in a decision, so the reply is refused and the failure policy answers.
 */
function isInteger(v: unknown): boolean {
  return typeof v === "number" ? Number.isSafeInteger(v) : typeof v === "string" && /^-?\d{1,16}$/.test(v);
}
