/**
 * A string-keyed hash table for the memory store's keys: the part of `Map` the store uses (get,
 * set, delete, size, iteration), built for many keys.
 *
 * Why not `Map`: with 100,000 keys a V8 `Map` lookup walks a bucket array and a chain of entries,
 * each in a different cache line, and compares a candidate key by reading that other string; in
 * a server, where every request allocates, those lines are rarely still cached. Measured with an
 * `await` per lookup (bench/memory.js conditions): about 180 ns per `Map.get` against 75 ns here.
 *
 * How: open addressing with linear probing over one `Int32Array` of slots, at most half full; a
 * slot holds the entry number + 1 in the bits the slot's index takes from the hash (`mask`) and,
 * above them, the key's hash bits that the index does not use (a tag), so a lookup reads one
 * 4-byte slot, then compares the rest of the hash before touching any key. Why 4 bytes and not
 * a (hash, entry) pair of 8: the slots are the one part of a lookup read at a random place even
 * when keys come in the order they were added, and over 100,000 keys a table of 8-byte pairs (2
 * MiB) was where most of a decision's time went (a cache miss: docs/benchmarks/memory.md); 4
 * bytes halve it. Keys, values and hashes live in dense arrays in insertion order (a delete
 * moves the last entry into the hole; slots are deleted by backward shift, no tombstones).
 * The hash is FNV-1a with a per-process random seed and a final avalanche, so keys an attacker
 * chooses cannot be aimed at one probe run without knowing the seed.
 *
 * Rows (`width` > 0): each entry also owns `width` numbers in one Float64Array, `rows`, at
 * `width` x its entry number, zero when the key is set, moved with the entry when a delete moves
 * it. The memory store keeps a sliding window's ring counts there (memory-rows.ts), so that a
 * decision reads them at an address the slot table gives, not behind its state object.
 */

const EMPTY = 0;
const MIN_CAPACITY = 16; // slots; a power of two

/** A random 32-bit seed per process: the table's probe sequence is not predictable from the keys. */
const SEED = (Math.random() * 0x1_0000_0000) >>> 0;

/** FNV-1a over the UTF-16 code units, seeded, then the murmur3 finaliser (the low bits pick the slot). */
export function hashKey(key: string): number {
  let h = (0x811c9dc5 ^ SEED) | 0;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

export class KeyIndex<V> {
  /**
   * Slot s: 0 if empty, else the entry number + 1 in the bits of `mask` and the key's hash in the
   * others (its tag; see above). Entries are at most half the slots, so entry + 1 fits the mask.
   */
  private table = new Int32Array(MIN_CAPACITY);
  private mask = MIN_CAPACITY - 1;
  private keys: string[] = [];
  private vals: V[] = [];
  private hashes: number[] = [];
  /** The entries' rows (see above): `width` numbers each, room for `rows.length / width` entries. */
  rows: Float64Array;

  constructor(readonly width = 0) {
    this.rows = new Float64Array(width * 8);
  }

  get size(): number {
    return this.keys.length;
  }

  /** @internal Bytes of the slot table (key-index.test.ts holds it to 4 a slot). */
  get tableBytes(): number {
    return this.table.byteLength;
  }

  get(key: string): V | undefined {
    // find() written out: one call fewer to inline into the memory store's hot path, whose
    // bytecode V8 inlines only up to a budget (see memory-single.ts, SingleTable).
    const h = hashKey(key);
    const t = this.table;
    const mask = this.mask;
    const tag = h & ~mask;
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const v = t[s] as number;
      if (v === EMPTY) return undefined;
      if ((v & ~mask) === tag && this.keys[(v & mask) - 1] === key) return this.vals[(v & mask) - 1];
    }
  }

  /** The entry number of `key` (its row starts at `width` times it), or -1: get() with the number. */
  entryOf(key: string): number {
    const h = hashKey(key);
    const t = this.table;
    const mask = this.mask;
    const tag = h & ~mask;
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const v = t[s] as number;
      if (v === EMPTY) return -1;
      if ((v & ~mask) === tag && this.keys[(v & mask) - 1] === key) return (v & mask) - 1;
    }
  }

  /** The value of entry `n` (from {@link entryOf}). */
  valAt(n: number): V {
    return this.vals[n] as V;
  }

  /** Copies the row of `key` (which must be present) into `to`. */
  rowOut(key: string, to: Float64Array): void {
    const o = this.find(key, hashKey(key)) * this.width;
    for (let i = 0; i < this.width; i++) to[i] = this.rows[o + i] as number;
  }

  /** Copies `from` into the row of `key` (which must be present). */
  rowIn(key: string, from: Float64Array): void {
    const o = this.find(key, hashKey(key)) * this.width;
    for (let i = 0; i < this.width; i++) this.rows[o + i] = from[i] as number;
  }

  has(key: string): boolean {
    return this.find(key, hashKey(key)) >= 0;
  }

  /** Adds or replaces the value of `key`. */
  set(key: string, value: V): this {
    const h = hashKey(key);
    const e = this.find(key, h);
    if (e >= 0) {
      this.vals[e] = value;
      this.zeroRow(e);
      return this;
    }
    if (2 * (this.keys.length + 1) > this.mask + 1) this.grow();
    const n = this.keys.length;
    this.zeroRow(n);
    this.keys.push(key);
    this.vals.push(value);
    this.hashes.push(h);
    this.place(h, n);
    return this;
  }

  /** Removes `key`; returns whether it was there. */
  delete(key: string): boolean {
    const s = this.slotOf(key, hashKey(key));
    if (s < 0) return false;
    this.removeAt(s);
    return true;
  }

  /** The entries, in insertion order (a deletion moves the last entry into the hole). */
  *entries(): IterableIterator<[string, V]> {
    for (let i = 0; i < this.keys.length; i++) yield [this.keys[i] as string, this.vals[i] as V];
  }

  /**
   * Calls `drop(key, value)` for every entry and deletes those for which it returns true. Safe
   * while deleting (it walks the dense arrays from the end; a delete moves only later entries).
   */
  deleteWhere(drop: (key: string, value: V) => boolean): void {
    for (let i = this.keys.length - 1; i >= 0; i--) {
      const key = this.keys[i] as string;
      if (drop(key, this.vals[i] as V)) this.delete(key);
    }
  }

  /**
   * Gives back the room of entries no longer there, once they are at most an eighth of the slots
   * (a sweep after a flood of distinct keys): the slot table, the dense arrays and the rows are
   * made again at a size for the entries left (slots a quarter full, so the next keys need no
   * growth at once). Entry numbers, and so rows, stay where they are: entries are dense.
   */
  compact(): void {
    const n = this.keys.length;
    const cap = this.mask + 1;
    if (cap > MIN_CAPACITY && 8 * n <= cap) {
      let to = MIN_CAPACITY;
      while (to < 4 * n) to *= 2;
      this.table = new Int32Array(to);
      this.mask = to - 1;
      for (let e = 0; e < n; e++) this.place(this.hashes[e] as number, e);
      // Popped arrays keep their backing store: copies hold only the entries left.
      this.keys = this.keys.slice();
      this.vals = this.vals.slice();
      this.hashes = this.hashes.slice();
    }
    const w = this.width;
    const room = Math.max(8, Math.ceil(n * 1.5));
    if (w > 0 && this.rows.length > 2 * room * w) this.rows = this.rows.slice(0, room * w);
  }

  /** Calls `f(value, n)` for every entry, `n` its entry number (its row's at `n x width`); `f` must not add or delete keys. */
  forEach(f: (value: V, n: number) => void): void {
    for (let n = 0; n < this.vals.length; n++) f(this.vals[n] as V, n);
  }

  /** The entry number of `key` (hash `h`), or -1. */
  private find(key: string, h: number): number {
    const s = this.slotOf(key, h);
    return s < 0 ? -1 : ((this.table[s] as number) & this.mask) - 1;
  }

  /** The slot of `key` (hash `h`), or -1. */
  private slotOf(key: string, h: number): number {
    const t = this.table;
    const mask = this.mask;
    const tag = h & ~mask;
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const v = t[s] as number;
      if (v === EMPTY) return -1;
      if ((v & ~mask) === tag && this.keys[(v & mask) - 1] === key) return s;
    }
  }

  /** Puts entry `e` (hash `h`) into the first free slot of its probe run. */
  private place(h: number, e: number): void {
    const t = this.table;
    const mask = this.mask;
    let s = h & mask;
    while (t[s] !== EMPTY) s = (s + 1) & mask;
    t[s] = (h & ~mask) | (e + 1);
  }

  /** The slot index where the entry in slot `j` would sit with no collision. */
  private homeOf(j: number): number {
    const mask = this.mask;
    return (this.hashes[((this.table[j] as number) & mask) - 1] as number) & mask;
  }

  /** Empties slot `s` (backward-shift deletion) and its entry (the last entry fills the hole). */
  private removeAt(s: number): void {
    const t = this.table;
    const mask = this.mask;
    const e = ((t[s] as number) & mask) - 1;
    // Shift back the entries of the probe run that follow, so lookups never meet a hole early.
    let hole = s;
    let j = (s + 1) & mask;
    while (t[j] !== EMPTY) {
      const home = this.homeOf(j);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      if (hole <= j ? home <= hole || home > j : home <= hole && home > j) {
        t[hole] = t[j] as number;
        hole = j;
      }
      j = (j + 1) & mask;
    }
    t[hole] = EMPTY;
    // Move the last entry into entry e, and repoint its slot.
    const last = this.keys.length - 1;
    if (e !== last) {
      const lh = this.hashes[last] as number;
      let ls = lh & mask;
      while (((t[ls] as number) & mask) !== last + 1) ls = (ls + 1) & mask;
      t[ls] = (lh & ~mask) | (e + 1);
      this.keys[e] = this.keys[last] as string;
      this.vals[e] = this.vals[last] as V;
      this.hashes[e] = lh;
      const w = this.width;
      for (let i = 0; i < w; i++) this.rows[e * w + i] = this.rows[last * w + i] as number;
    }
    this.keys.pop();
    this.vals.pop();
    this.hashes.pop();
  }

  /** Zeroes entry `n`'s row, making room for it first (the rows grow by half, copied). */
  private zeroRow(n: number): void {
    const w = this.width;
    if (w === 0) return;
    if ((n + 1) * w > this.rows.length) {
      const rows = new Float64Array(Math.ceil((n + 1) * 1.5) * w);
      rows.set(this.rows);
      this.rows = rows;
    }
    for (let i = n * w; i < (n + 1) * w; i++) this.rows[i] = 0;
  }

  /** Doubles the slots and places every entry again (each slot's tag is the hash above the new mask). */
  private grow(): void {
    const cap = 2 * (this.mask + 1);
    this.table = new Int32Array(cap);
    this.mask = cap - 1;
    for (let e = 0; e < this.keys.length; e++) this.place(this.hashes[e] as number, e);
  }
}
