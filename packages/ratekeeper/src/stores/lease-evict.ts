import type { KeyLease } from "./lease-key.js";

/** How many idle keys {@link evictee} looks at for one whose block is spent or over (a bound on its cost). */
const LOOK = 16;

/**
 * The key quota leasing drops to make room for another (option `lease.maxKeys`), or undefined
 * when every key is busy with a take. `keys` is in the order of each key's last take (the
 * table moves a key to the end when it takes). Among the first {@link LOOK} idle keys, the first
 * whose block is spent or over at `nowMs` (most often a key seen once: its first block was one
 * unit), else the first idle key. Dropping a key that holds a block costs it a give-back and a
 * cold restart (a first take sized for what waits): a hot key, idle between its takes, must not
 * be the one dropped each time a stream of keys seen once fills the table.
 */
export function evictee(keys: ReadonlyMap<string, KeyLease>, nowMs: number): string | undefined {
  let first: string | undefined;
  let looked = 0;
  for (const [key, k] of keys) {
    if (k.taking || k.waiters.length > 0) continue;
    first ??= key;
    if (k.units === 0 || nowMs >= k.expiresAt) return key;
    if (++looked >= LOOK) break;
  }
  return first;
}
