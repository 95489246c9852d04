/**
 * Which middleware counts in each store's namespaces, to tell when two would count in the same
 * counters without having chosen to (validation `RK_STORE_REUSE`, see validations.ts).
 *
 * A limiter's namespace defaults to its limits, so that every server's copy of one policy shares
 * its counters in a shared store. Two middlewares of one process given the same store and the
 * same limits then meet too: a request through both (an app-wide limiter and a login limiter
 * with the same numbers) is counted twice in one counter, and each limits the other's routes.
 * Only namespaces left to their default are claimed: a namespace the user wrote is sharing chosen.
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
