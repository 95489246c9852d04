/**
 * Per-key sums of admitted cost over the last window, `(t - windowMs, t]`, at each admission:
 * the number that shows over-admission (a fixed window lets `2 x limit` through in a span just
 * over its boundary; a token bucket `capacity + limit` in one window).
 *
 * Each key keeps a queue of its admissions still inside the window (time and cost), in a ring
 * that grows by doubling. Times pushed for one key must not decrease.
 */
export class RollingWindow {
  private readonly windowMs: number;
  private times: (Float64Array | undefined)[] = [];
  private costs: (Float64Array | undefined)[] = [];
  private heads = new Uint32Array(0);
  private lens = new Uint32Array(0);
  private sums = new Float64Array(0);

  constructor(windowMs: number, keys: number) {
    this.windowMs = windowMs;
    this.times = new Array<Float64Array | undefined>(keys);
    this.costs = new Array<Float64Array | undefined>(keys);
    this.heads = new Uint32Array(keys);
    this.lens = new Uint32Array(keys);
    this.sums = new Float64Array(keys);
  }

  /** Records `cost` admitted for key `k` at `t`; returns the key's admitted cost in `(t - window, t]`. */
  push(k: number, t: number, cost: number): number {
    let times = this.times[k];
    let costs = this.costs[k] as Float64Array;
    let head = this.heads[k] as number;
    let len = this.lens[k] as number;
    let sum = this.sums[k] as number;
    if (times === undefined) {
      times = this.times[k] = new Float64Array(8);
      costs = this.costs[k] = new Float64Array(8);
      head = len = sum = 0;
    }
    const cap = times.length;
    const cutoff = t - this.windowMs;
    while (len > 0 && (times[head] as number) <= cutoff) {
      sum -= costs[head] as number;
      head = (head + 1) & (cap - 1);
      len--;
    }
    if (len === cap) {
      // Grow: unroll the ring into a buffer twice the size.
      const t2 = new Float64Array(cap * 2);
      const c2 = new Float64Array(cap * 2);
      for (let i = 0; i < len; i++) {
        t2[i] = times[(head + i) & (cap - 1)] as number;
        c2[i] = costs[(head + i) & (cap - 1)] as number;
      }
      times = this.times[k] = t2;
      costs = this.costs[k] = c2;
      head = 0;
    }
    const at = (head + len) & (times.length - 1);
    times[at] = t;
    costs[at] = cost;
    sum += cost;
    this.heads[k] = head;
    this.lens[k] = len + 1;
    this.sums[k] = sum;
    return sum;
  }

  /**
   * Frees key `k`'s queue if nothing of it is inside the window at `t`, so memory follows the
   * keys active now. Returns whether the key has no queue left.
   */
  release(k: number, t: number): boolean {
    const times = this.times[k];
    if (times === undefined) return true;
    const len = this.lens[k] as number;
    const last = len > 0 ? (times[((this.heads[k] as number) + len - 1) & (times.length - 1)] as number) : -Infinity;
    if (last > t - this.windowMs) return false;
    this.times[k] = undefined;
    this.costs[k] = undefined;
    return true;
  }
}
