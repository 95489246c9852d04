/**
 * Which middleware counts in each store's namespaces, to tell when two would count in the same
 * counters without having chosen to (validation `RK_STORE_REUSE`, see validations.ts).
 *
 * A limiter's namespace defaults to its limits, so that every server's copy of one policy shares
 * its counters in a shared store. Two middlewares of one process given the same store and the
 * same limits then meet too: a request through both (an app-wide limiter and a login limiter
 * with the same numbers) is counted twice in one counter, and each limits the other's routes.
 * Only namespaces left to their default are claimed: a namespace the user wrote is sharing chosen.
 * Concurrency limits are claimed likewise: two middlewares' `concurrency: { limit, store }` with
 * the same limit share their in-flight leases.
 */

/**
 * Set on options to name the claimant when several middlewares are one to the user: the
 * express-rate-limit mapping makes a middleware per limit value, all one `rateLimit()`.
 */
export const COUNTER_OWNER = Symbol("ratekeeper.counterOwner");

/** store -> namespace -> the middleware counting there (held weakly: one let go frees its claim). */
const claims = new WeakMap<object, Map<string, WeakRef<object>>>();

/**
 * Namespaces remembered per store. A limit function answering a value per user makes a limiter,
 * and a namespace, per value: past this many, new namespaces are not checked (the check only
 * warns, and the first middlewares made, the usual mistake, are the ones remembered).
 */
const MAX_NAMESPACES = 4096;

/**
 * Records that `owner` counts in `namespace` of `store`. Answers false when another middleware,
 * still alive, counts there already.
 * @example if (!claimCounters(store, limiter.namespace, this)) validations.storeReuse(limiter.namespace);
 */
export function claimCounters(store: object, namespace: string, owner: object): boolean {
  let byNamespace = claims.get(store);
  if (byNamespace === undefined) {
    byNamespace = new Map();
    claims.set(store, byNamespace);
  }
  const holder = byNamespace.get(namespace)?.deref();
  if (holder !== undefined) return holder === owner;
  if (byNamespace.size >= MAX_NAMESPACES) {
    // Forget the claims of middlewares let go before giving up on new ones.
    for (const [ns, ref] of byNamespace) if (ref.deref() === undefined) byNamespace.delete(ns);
    if (byNamespace.size >= MAX_NAMESPACES) return true;
  }
  byNamespace.set(namespace, new WeakRef(owner));
  return true;
}

/** A middleware's options, as far as the namespaces of its counters go. */
interface CounterOptions {
  readonly limits?: unknown;
  readonly store?: unknown;
  readonly namespace?: unknown;
  readonly concurrency?: unknown;
}

/**
 * Claims the namespaces `o` leaves to their default in a store it names (counters of `limits`
 * built into `limiter`; leases of `concurrency` options built into `concurrency`), and warns
 * through `v` for each that another middleware holds.
 */
export function claimDefaultNamespaces(
  o: CounterOptions,
  limiter: { readonly namespace: string } | undefined,
  concurrency: { readonly namespace: string } | undefined,
  owner: object,
  v: { storeReuse(namespace: string, kind: "limits" | "concurrency"): void },
): void {
  if (limiter !== undefined && o.limits !== undefined && isObject(o.store) && o.namespace === undefined) {
    if (!claimCounters(o.store, limiter.namespace, owner)) v.storeReuse(limiter.namespace, "limits");
  }
  // Options, not a ConcurrencyLimiter given (one limiter given to two middlewares is sharing chosen).
  const c = o.concurrency as CounterOptions | undefined;
  if (concurrency !== undefined && c !== concurrency && isObject(c) && isObject(c.store) && c.namespace === undefined) {
    // Leases live apart from counters: claimed under their own name.
    if (!claimCounters(c.store, `concurrency ${concurrency.namespace}`, owner)) v.storeReuse(concurrency.namespace, "concurrency");
  }
}

function isObject(x: unknown): x is object {
  return typeof x === "object" && x !== null;
}
