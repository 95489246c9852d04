/**
 * A namespace as it goes into a Redis key, before the `:` that ends it: `<prefix>{<namespace>:<key>}`
 * (a rate limit's state, quota leasing's lessees beside it) and `<prefix>{<namespace>:<key>}:c` (a
 * concurrency limit's leases). Its own `:` is written `%3A` and its `%` `%25`, so that no
 * namespace and key meet another's in one Redis key: namespace `n` with key `b:x` and namespace
 * `n:b` with key `x` were both `{n:b:x}`, and a client choosing its key (an API key, a header
 * value) spent another limiter's allowance or took another pool's slots. Namespaces without `:`
 * or `%` (every default: policy ids) are unchanged, so their keys stay what they were. The
 * namespace stays inside the braces, so a decision's keys still share one Redis Cluster hash slot.
 */
export function keyPart(namespace: string): string {
  return namespace.includes(":") || namespace.includes("%") ? namespace.replace(/%/g, "%25").replace(/:/g, "%3A") : namespace;
}
