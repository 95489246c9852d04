import type { RateLimiter } from "../limiter.js";
import type { RateLimitResult } from "./result.js";

/**
 * A callback after the current turn's I/O: `setImmediate` where the runtime has it (Node, Bun,
 * Deno), else a zero timeout (Cloudflare Workers without nodejs_compat have no setImmediate).
 */
const afterIo = (fn: () => void): unknown => (typeof setImmediate === "function" ? setImmediate(fn) : setTimeout(fn, 0));

/**
 * What happens to an admitted request after the verdict: holding it for its shaping delay
 * (leaky bucket `mode: "shape"`), giving its units back when it will not be served (the client
 * left while held), and the `countOnly` refund once the response is known.
 */
export class Shaper<Req> {
  /**
   * @param report told about refund failures (the request itself is never failed by them)
   */
  constructor(
    private readonly limiter: RateLimiter | undefined,
    private readonly countOnly: "failed" | "successful" | undefined,
    private readonly isFailed: (statusCode: number, req: Req) => boolean | Promise<boolean>,
    private readonly report: (error: unknown, req: Req) => void,
  ) {}

  /**
   * Holds an admitted request for its shaping delay. Resolves `true` when the wait is over, or
   * `false` if `signal` aborts first (the client left): its place in the queue is then given back.
   */
  hold(result: RateLimitResult, signal: AbortSignal | undefined, req: Req): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (signal?.aborted) {
        this.release(result, req);
        resolve(false);
        return;
      }
      let done = false;
      const onAbort = (): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.release(result, req);
        resolve(false);
      };
      const timer = setTimeout(() => {
        // One more turn of the event loop before passing the request on: a disconnect that arrived
        // while the loop was busy is read in the poll phase, which runs before setImmediate callbacks.
        afterIo(() => {
          signal?.removeEventListener("abort", onAbort);
          if (done) return;
          done = true;
          if (signal?.aborted) {
            this.release(result, req);
            resolve(false);
          } else resolve(true);
        });
      }, result.delayMs);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Gives back the cost (and the lease) of an admitted request that will not be served. */
  release(result: RateLimitResult, req: Req): void {
    this.releaseLease(result, req);
    if (result.key === undefined || result.cost === 0 || !result.pass || result.decision === undefined) return;
    this.limiter?.refund(result.key, result.cost).catch((e: unknown) => this.report(e, req));
  }

  /** Gives back the request's lease (option `concurrency`), if it holds one. Idempotent. */
  releaseLease(result: RateLimitResult, req: Req): void {
    result.lease?.release().catch((e: unknown) => this.report(e, req));
  }

  /**
   * After the response: with `countOnly`, refunds the requests that should not count.
   * @param statusCode the response's status, or `undefined` when the client left before it was sent (counts as failed)
   */
  settle(result: RateLimitResult, statusCode: number | undefined, req: Req): void {
    if (!result.settles) return;
    this.releaseLease(result, req);
    if (this.countOnly === undefined) return;
    let failed: boolean | Promise<boolean>;
    try {
      failed = statusCode === undefined || this.isFailed(statusCode, req);
    } catch (e) {
      // Runs in the response's "finish" listener, where a throw would take the process down:
      // reported, and the request stays counted (as express-rate-limit does).
      this.report(e, req);
      return;
    }
    if (failed instanceof Promise) {
      // An async isFailed (express-rate-limit's requestWasSuccessful may be): refund when it answers.
      failed.then(
        (f) => ((this.countOnly === "failed") !== f ? this.release(result, req) : undefined),
        (e: unknown) => this.report(e, req),
      );
      return;
    }
    if ((this.countOnly === "failed") !== failed) this.release(result, req);
  }
}
