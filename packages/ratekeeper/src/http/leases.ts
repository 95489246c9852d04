import type { ConcurrencyLimiter, Lease } from "../concurrency.js";
import { MAX_TIMER_MS } from "../core/max-timer.js";
import type { RateLimiter } from "../limiter.js";
import { tooManyInFlight, unavailable } from "./problem.js";
import { refusal, type RateLimitResult } from "./result.js";

/**
 * The middleware's `concurrency` option: a request the rate limit admitted takes a lease on its
 * key; the lease goes back when the response finishes or the client leaves (`Shaper.settle` /
 * `Shaper.release`, called by the adapters), and is kept alive until then (see
 * {@link keptAlive}). A request that finds every slot held is refused with 429 and its
 * rate-limit charge is given back: it was never served.
 */
export class LeaseGate<Req> {
  constructor(
    readonly pool: ConcurrencyLimiter,
    private readonly limiter: RateLimiter | undefined,
    private readonly shadow: boolean,
    private readonly storeDeny: boolean,
    private readonly report: (error: unknown, req: Req) => void,
  ) {}

  /** Takes a lease for an admitted request; its result then carries it (and settles). */
  async admit(r: RateLimitResult, req: Req): Promise<RateLimitResult> {
    let lease: Lease;
    try {
      lease = await this.pool.acquire(r.key as string);
    } catch (e) {
      this.report(e, req);
      if (!this.storeDeny) return r;
      this.refund(r, req);
      return refusal(unavailable(), []);
    }
    if (lease.acquired) return { ...r, settles: true, lease: keptAlive(lease, this.pool.leaseMs, (e) => this.report(e, req)) };
    // Shadow mode reports and never blocks: the request goes on, without a lease.
    if (this.shadow) return r;
    this.refund(r, req);
    return refusal(tooManyInFlight(this.pool.limit), r.headers, r.decision, r.key, 0);
  }

  /** Gives back the rate-limit charge of a request that will not be served. */
  private refund(r: RateLimitResult, req: Req): void {
    if (this.limiter === undefined || r.key === undefined || r.cost === 0 || r.decision === undefined) return;
    this.limiter.refund(r.key, r.cost).catch((e: unknown) => this.report(e, req));
  }
}

/**
 * `lease`, renewed every third of `leaseMs` until it is released: a request in flight longer
 * than its lease (a long download, a slow upstream) would otherwise lose its slot to the next
 * request while it still runs, and more than `limit` would be in flight. A renew that says the
 * lease is not held is reported (once in a row) and the renewing goes on: a store whose Redis is
 * down says so under the `"closed"` policy while the lease is still held there, and the next
 * renew once Redis answers keeps it. A renew that fails is reported and tried again at the next
 * turn. The timer never keeps the process alive; a lease longer than about 74 days is renewed
 * every 24.8 days, the longest a timer waits.
 */
function keptAlive(lease: Lease, leaseMs: number, report: (error: unknown) => void): Lease {
  let lost = false;
  const timer = setInterval(
    () => {
      lease.renew().then(
        (held) => {
          if (held || lost) {
            lost = !held;
            return;
          }
          lost = true;
          report(
            new Error(
              `concurrency: a renew of the lease of a request in flight on "${lease.key}" found it not held: its slot may be another's`,
            ),
          );
        },
        (e: unknown) => report(e),
      );
    },
    Math.min(MAX_TIMER_MS, Math.max(1, Math.floor(leaseMs / 3))),
  );
  (timer as { unref?: () => void }).unref?.();
  return {
    acquired: lease.acquired,
    limit: lease.limit,
    remaining: lease.remaining,
    retryAfterMs: lease.retryAfterMs,
    reason: lease.reason,
    key: lease.key,
    id: lease.id,
    release: () => {
      clearInterval(timer);
      return lease.release();
    },
    renew: () => lease.renew(),
  };
}
