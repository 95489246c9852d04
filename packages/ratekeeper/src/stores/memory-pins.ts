/**
 * The keys a memory store table holds outside its two generations (memory-table.ts), and how
 * many holders each has. A turn never drops them: their state lasts however many other keys
 * arrive, until the last holder lets go (`unpin`); then the key joins the young
 * generation and is bounded like any other again.
 *
 * Why: the Redis store's `"degraded"` policy (stores/redis/degraded.ts) limits each key at a
 * local share while Redis is down, in one bounded memory store. A key left alone while
 * `maxKeys / 2` to `maxKeys` other keys arrived was dropped there, and its next request started a
 * fresh share in the same outage; a client with that many keys of its own could so give any key
 * a fresh share again and again. The policy pins a key while its local admissions wait to be
 * charged to Redis, and lets go once Redis took them. Its ledger's bound bounds the pins; the
 * store's `maxKeys` and `maxBytes` bound the other keys, so the store holds at most `maxKeys` +
 * the pins.
 */
import { KeyIndex } from "./key-index.js";

export class PinnedKeys<E> {
  /** The pinned keys' entries. */
  readonly entries: KeyIndex<E>;
  /** Holders of a key beyond its first (most keys have one holder: nothing is stored for them). */
  private readonly extra = new Map<string, number>();

  /** `width`: the numbers of each key's row (key-index.ts), which go with its entry. */
  constructor(width = 0) {
    this.entries = new KeyIndex(width);
  }

  /** One more holder of `key` when it is pinned already; false when it is not. */
  hold(key: string): boolean {
    if (!this.entries.has(key)) return false;
    this.extra.set(key, (this.extra.get(key) ?? 0) + 1);
    return true;
  }

  /** One holder of `key` fewer: after its last holder, its entry, taken out; else undefined. */
  release(key: string): E | undefined {
    const n = this.extra.get(key);
    if (n !== undefined) {
      if (n > 1) this.extra.set(key, n - 1);
      else this.extra.delete(key);
      return undefined;
    }
    const e = this.entries.get(key);
    if (e !== undefined) {
      this.entries.delete(key);
      // Most of an outage's pins released: their room goes too (the table's unpin then forgets
      // any row it cached, as after any change).
      this.entries.compact();
    }
    return e;
  }
}
