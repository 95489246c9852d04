/**
 * The heaviest hitters of a stream in bounded memory: Space-Saving (Metwally, Agrawal and
 * El Abbadi, "Efficient Computation of Frequent and Top-k Elements in Data Streams", 2005).
 *
 * It monitors at most `capacity` items. An item already monitored has its count raised; a new
 * one, when the table is full, takes the place of the item with the smallest count `m`, and
 * starts at `m + weight` with an error of `m` (it may have been seen up to `m` times before).
 * Guarantees, for a stream of total weight N:
 * - every monitored item's true count lies in `[count - error, count]`;
 * - the smallest count, and so every error, is at most `N / capacity`;
 * - every item whose true count exceeds `N / capacity` is monitored.
 *
 * The minimum is found with a binary min-heap on the counts, so an update costs O(log capacity)
 * and never allocates once the table is full (a flood of distinct keys cannot grow it).
 */
export class SpaceSaving<P = undefined> {
  readonly capacity: number;
  // Each monitored item lives in a slot (its fields in parallel arrays); the heap orders slots by
  // count. Sifting moves slot numbers in typed arrays: no Map write per step, only one lookup per
  // offer, and a delete and a set when an item is replaced.
  private readonly items: string[] = [];
  private readonly counts: Float64Array;
  private readonly errors: Float64Array;
  private readonly payloads: (P | undefined)[] = [];
  /** item -> its slot. */
  private readonly slotOf = new Map<string, number>();
  /** Heap of slots, smallest count first. */
  private readonly heap: Int32Array;
  /** slot -> its position in the heap. */
  private readonly heapPos: Int32Array;
  private totalWeight = 0;

  /** @param capacity how many items to monitor (the error bound is total / capacity). */
  constructor(capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`capacity: must be a whole number >= 1 (got ${capacity})`);
    this.capacity = capacity;
    this.counts = new Float64Array(capacity);
    this.errors = new Float64Array(capacity);
    this.heap = new Int32Array(capacity);
    this.heapPos = new Int32Array(capacity);
  }

  /** Total weight offered so far. */
  get total(): number {
    return this.totalWeight;
  }

  /** Items monitored now. */
  get size(): number {
    return this.items.length;
  }

  /**
   * Counts `weight` more for `item`; `payload` (e.g. the rule that denied it) is kept with it,
   * replacing the previous one.
   */
  offer(item: string, weight = 1, payload?: P): void {
    this.totalWeight += weight;
    const known = this.slotOf.get(item);
    if (known !== undefined) {
      this.counts[known] = (this.counts[known] as number) + weight;
      this.payloads[known] = payload;
      this.down(this.heapPos[known] as number);
      return;
    }
    const n = this.items.length;
    if (n < this.capacity) {
      this.items.push(item);
      this.payloads.push(payload);
      this.counts[n] = weight;
      this.errors[n] = 0;
      this.slotOf.set(item, n);
      this.heap[n] = n;
      this.heapPos[n] = n;
      this.up(n);
      return;
    }
    // Full: the new item replaces the one with the smallest count and inherits it as its error.
    const slot = this.heap[0] as number;
    const min = this.counts[slot] as number;
    this.slotOf.delete(this.items[slot] as string);
    this.slotOf.set(item, slot);
    this.items[slot] = item;
    this.payloads[slot] = payload;
    this.counts[slot] = min + weight;
    this.errors[slot] = min;
    this.down(0);
  }

  /**
   * The `n` items with the highest counts, highest first. `count - error` is a lower bound of
   * an item's true count, `count` an upper bound.
   */
  top(n = this.capacity): { item: string; count: number; error: number; payload: P | undefined }[] {
    const out = this.items.map((item, i) => ({
      item,
      count: this.counts[i] as number,
      error: this.errors[i] as number,
      payload: this.payloads[i],
    }));
    out.sort((a, b) => b.count - a.count || a.error - b.error || (a.item < b.item ? -1 : 1));
    return out.slice(0, n);
  }

  /** Forgets everything. */
  clear(): void {
    this.items.length = 0;
    this.payloads.length = 0;
    this.slotOf.clear();
    this.totalWeight = 0;
  }

  private countAt(i: number): number {
    return this.counts[this.heap[i] as number] as number;
  }

  private up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.countAt(parent) <= this.countAt(i)) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private down(i: number): void {
    const n = this.items.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) return;
      const r = l + 1;
      const c = r < n && this.countAt(r) < this.countAt(l) ? r : l;
      if (this.countAt(i) <= this.countAt(c)) return;
      this.swap(i, c);
      i = c;
    }
  }

  private swap(i: number, j: number): void {
    const a = this.heap[i] as number;
    const b = this.heap[j] as number;
    this.heap[i] = b;
    this.heap[j] = a;
    this.heapPos[b] = i;
    this.heapPos[a] = j;
  }
}
