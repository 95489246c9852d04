/**
 * What a check charged, given back when the check is answered with an error: a check of several
 * descriptors, or a batch of checks, in which one store call failed is answered 503 as a whole,
 * and a client that retries it must not be charged twice for the descriptors decided beside the
 * failure. Envoy's ratelimit service charges descriptors independently of each other's *denials*
 * (one descriptor's denial does not undo another's charge, service/decide.ts); an error answer is
 * no decision at all, so it keeps nothing.
 */
import type { Decision, RateLimiter } from "ratekeeper";
import type { ServiceLog } from "./config-faults.js";
import { CheckError, StoreFailure, type DecisionObserver, type LimitStatKey } from "./types.js";

/** One charge a check made: `cost` units of `limiter` on `state`, its decision counted `ok` under `label` and `rule`. */
export interface Charge {
  readonly limiter: RateLimiter;
  readonly state: string;
  readonly cost: number;
  readonly label: string;
  readonly rule: string;
  /** The per-limit stats hit it was counted as (the observer's `limitHit`), when one was. */
  readonly hit?: { readonly stat: LimitStatKey; readonly limit: number; readonly usedBefore: number } | undefined;
}

/** Where refunds are reported: a refund that fails to the log, one done to the observer (no longer `ok`). */
export interface RefundReport {
  readonly log: ServiceLog | undefined;
  readonly observer: DecisionObserver | undefined;
}

/** The log line of a refund that failed. */
export const REFUND_FAILED = "refund failed: a check answered with an error stays charged";

/**
 * Whether `d` charged its store: admitted, and not by the open failure policy (`reason`
 * `store-error`), which charged nothing. An admission the degraded or insurance policy answered
 * charged a local stand-in, which the store's refund reaches while Redis is down (the library's
 * failure handling applies a refund it cannot send).
 */
export function charged(d: Decision): boolean {
  return d.allowed && d.reason !== "store-error";
}

/**
 * Gives back each charge, best effort (at once, together), and waits for them. Each one given
 * back is reported to the observer (`refunded`: it admitted nothing); one that fails stays
 * charged, and stays `ok`. Refunds that fail are logged in one line (the first failure's error
 * and key, how many failed of how many, and the error id of the answer, `cause`'s when a
 * StoreFailure), never thrown: a batch of a thousand checks failing is one line, not a thousand.
 */
export async function refund(charges: readonly Charge[], cause: unknown, report: RefundReport): Promise<void> {
  let failed = 0;
  let first: { err: unknown; key: string; cost: number } | undefined;
  await Promise.all(
    charges.map((c) =>
      c.limiter.refund(c.state, c.cost).then(
        () => {
          report.observer?.refunded?.(c.label, c.rule);
          if (c.hit) report.observer?.limitRefunded?.(c.hit.stat, c.hit.limit, c.hit.usedBefore, c.cost);
        },
        (err: unknown) => {
          failed++;
          first ??= { err, key: c.state, cost: c.cost };
        },
      ),
    ),
  );
  if (first === undefined) return;
  const id = cause instanceof StoreFailure ? { errorId: cause.errorId } : {};
  report.log?.warn({ ...first, failed, of: charges.length, ...id }, REFUND_FAILED);
}

/**
 * The values of `each` once all have settled; when one rejected, what `mine` recorded is given
 * back first and the error thrown (the first that is not a CheckError, the store's failure
 * ahead of a bad input: the caller may retry it; else the first). Otherwise `mine` is added to
 * `into`, the charges of the batch this is part of. (Promise.all first: a check that succeeds,
 * the common case, makes no settled-result objects.)
 */
export function allOrRefund<T>(
  each: readonly Promise<T>[],
  mine: Charge[],
  into: Charge[] | undefined,
  report: RefundReport,
): Promise<T[]> {
  return Promise.all(each).then(
    (values) => {
      into?.push(...mine);
      return values;
    },
    () => refundAll(each, mine, report),
  );
}

/** {@link allOrRefund} once one of `each` rejected: waits for the others (their charges recorded), gives back `mine`, throws. */
async function refundAll<T>(each: readonly Promise<T>[], mine: Charge[], report: RefundReport): Promise<never> {
  const done = await Promise.allSettled(each);
  let failed: PromiseRejectedResult | undefined;
  for (const d of done) {
    if (d.status !== "rejected") continue;
    if (failed === undefined || (failed.reason instanceof CheckError && !(d.reason instanceof CheckError))) failed = d;
  }
  const reason = (failed as PromiseRejectedResult).reason as unknown;
  await refund(mine, reason, report);
  throw reason;
}
