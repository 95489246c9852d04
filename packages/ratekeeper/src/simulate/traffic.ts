/**
 * Traffic for the simulator: a list of requests (arrival time, key, cost), kept in columns
 * (typed arrays) so that a million requests take a few tens of megabytes and replay fast.
 */

/** Requests in arrival order. Times are integer milliseconds since the epoch. */
export interface Traffic {
  /** A short name (`steady`, `access.log`). */
  readonly name: string;
  /** One sentence: what the traffic is. */
  readonly description: string;
  /** Arrival times, ascending. */
  readonly timesMs: Float64Array;
  /** Key of each request, as an index into {@link Traffic.keys}. */
  readonly keyIds: Uint32Array;
  /** Cost of each request; `undefined` when every request costs 1. */
  readonly costs: Uint32Array | undefined;
  /** The distinct keys, in order of first appearance. */
  readonly keys: readonly string[];
  /** Start of the span to chart (ms); at or before the first arrival. */
  readonly startMs: number;
  /** End of the span to chart (ms); after the last arrival. */
  readonly endMs: number;
}

/**
 * Collects requests in any order and builds a {@link Traffic} sorted by time (ties keep the
 * order they were added in).
 * @example
 * const b = new TrafficBuilder();
 * b.add(1_700_000_000_000, "user:1");
 * const traffic = b.build("mine", "two requests");
 */
export class TrafficBuilder {
  private times: Float64Array = new Float64Array(1024);
  private ids: Uint32Array = new Uint32Array(1024);
  private costs: Uint32Array | undefined;
  private n = 0;
  private sorted = true;
  private readonly keyIndex = new Map<string, number>();
  private readonly keys: string[] = [];

  /** Requests added so far. */
  get size(): number {
    return this.n;
  }

  /** Adds a request at `timeMs` (rounded down to a whole millisecond) for `key`, of `cost` units. */
  add(timeMs: number, key: string, cost = 1): void {
    let id = this.keyIndex.get(key);
    if (id === undefined) {
      id = this.keys.length;
      this.keys.push(key);
      this.keyIndex.set(key, id);
    }
    this.addId(timeMs, id, cost);
  }

  /** Like {@link TrafficBuilder.add} with a key id from {@link TrafficBuilder.keyId}: no string lookup. */
  addId(timeMs: number, id: number, cost = 1): void {
    if (this.n === this.times.length) this.grow();
    const t = Math.floor(timeMs);
    if (this.n > 0 && t < (this.times[this.n - 1] as number)) this.sorted = false;
    this.times[this.n] = t;
    this.ids[this.n] = id;
    if (cost !== 1 && this.costs === undefined) {
      this.costs = new Uint32Array(this.times.length);
      this.costs.fill(1, 0, this.n);
    }
    if (this.costs !== undefined) this.costs[this.n] = cost;
    this.n++;
  }

  /** The id of `key`, registering it. */
  keyId(key: string): number {
    let id = this.keyIndex.get(key);
    if (id === undefined) {
      id = this.keys.length;
      this.keys.push(key);
      this.keyIndex.set(key, id);
    }
    return id;
  }

  /**
   * The traffic, sorted by arrival time.
   * @param span the time span to chart; defaults to the first arrival up to just after the last
   */
  build(name: string, description: string, span?: { startMs: number; endMs: number }): Traffic {
    const n = this.n;
    let timesMs = this.times.slice(0, n);
    let keyIds = this.ids.slice(0, n);
    let costs = this.costs?.slice(0, n);
    if (!this.sorted) {
      const order = new Uint32Array(n);
      for (let i = 0; i < n; i++) order[i] = i;
      const t = timesMs;
      order.sort((a, b) => (t[a] as number) - (t[b] as number) || a - b);
      timesMs = permute(timesMs, order, new Float64Array(n));
      keyIds = permute(keyIds, order, new Uint32Array(n));
      if (costs) costs = permute(costs, order, new Uint32Array(n));
    }
    const first = n > 0 ? (timesMs[0] as number) : 0;
    const last = n > 0 ? (timesMs[n - 1] as number) : 0;
    const startMs = Math.min(span?.startMs ?? first, first);
    const endMs = Math.max(span?.endMs ?? last + 1, last + 1);
    return { name, description, timesMs, keyIds, costs, keys: this.keys.slice(), startMs, endMs };
  }

  private grow(): void {
    const size = this.times.length * 2;
    const times = new Float64Array(size);
    times.set(this.times);
    this.times = times;
    const ids = new Uint32Array(size);
    ids.set(this.ids);
    this.ids = ids;
    if (this.costs) {
      const costs = new Uint32Array(size);
      costs.set(this.costs);
      this.costs = costs;
    }
  }
}

function permute<T extends Float64Array | Uint32Array>(from: T, order: Uint32Array, to: T): T {
  for (let i = 0; i < order.length; i++) to[i] = from[order[i] as number] as number;
  return to;
}
