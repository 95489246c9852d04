import { Histogram, type HistogramConfiguration } from "prom-client";

/** The one series of a histogram without labels, as prom-client keeps it (`hashMap[""]`). */
interface Series {
  sum: number;
  count: number;
  bucketValues: Record<string, number>;
}

type Observe = (...args: unknown[]) => void;

/**
 * A prom-client `Histogram` without labels whose `observe(value)` costs a few nanoseconds: the
 * store latency is observed on every decision, and prom-client's `observe` took 180-300 ns
 * there (it builds a closure and a label object per call, hashes the labels, and looks the bucket
 * up by the bound turned into a string). This one keeps the series in numbers of its own (a
 * count per bucket, the sum, the count), adding to them as prom-client would (the same additions
 * in the same order, so the sum is the same to the last bit), and writes them into prom-client's
 * series when it is read (a scrape, `get()`). `observe` is replaced on the instance (prom-client
 * sets its own there), never deleted: a `delete` left the object in V8's dictionary mode.
 *
 * Anything else hands the series over to prom-client for good: labels, exemplars or a `collect`
 * in the configuration (then prom-client's from the start), a call with labels, a value that is
 * not a finite number, `zero()`, `labels()`, `remove()`. `reset()` empties both. Scraping is
 * prom-client's. test/histogram.test.ts and test/metrics-scrape.test.ts compare the exposition
 * with a plain `Histogram` fed the same values.
 */
export class FastHistogram extends Histogram {
  private readonly bounds: Float64Array;
  private readonly keys: readonly string[];
  /** Per bound, the values counted in its bucket (the last bound's bucket is the count). */
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;
  /** The series exists (as prom-client's does until `reset()` and again after a value). */
  private live = true;
  /** The series is kept here, not by prom-client. */
  private own: boolean;
  /** prom-client's own `observe`. */
  private readonly promObserve: Observe;

  constructor(config: HistogramConfiguration<string>) {
    super(config);
    const self = this as unknown as { upperBounds?: readonly number[]; enableExemplars?: boolean; labelNames?: readonly string[] };
    const bounds = self.upperBounds ?? [];
    this.bounds = Float64Array.from(bounds);
    this.keys = bounds.map(String);
    this.counts = new Float64Array(bounds.length);
    this.own = self.enableExemplars !== true && (self.labelNames ?? []).length === 0 && config.collect === undefined;
    const mine = this as unknown as { observe: Observe };
    // prom-client sets `observe` on each instance; replaced by the fast one (same property), a
    // method of this class called on this instance as `observe`.
    this.promObserve = mine.observe;
    // eslint-disable-next-line @typescript-eslint/unbound-method
    if (this.own) mine.observe = this.observeFast;
  }

  // Two parameters rather than a rest list: an array per call cost as much as the rest of it.
  private observeFast(value: unknown, more?: unknown): void {
    if (more === undefined && typeof value === "number" && Number.isFinite(value)) {
      const { bounds } = this;
      let i = 0;
      while (i < bounds.length && !(value <= (bounds[i] as number))) i++;
      this.sum += value;
      this.count += 1;
      // Past the last bound: only the count (prom-client's +Inf bucket is the count).
      if (i < bounds.length) this.counts[i]! += 1;
      this.live = true;
      return;
    }
    this.handOver();
    if (more === undefined) this.promObserve(value);
    else this.promObserve(value, more);
  }

  /** Writes the series into prom-client's (made anew after a `reset()`). */
  private flush(): void {
    if (!this.own || !this.live) return;
    const map = (this as unknown as { hashMap: Record<string, Series | undefined> }).hashMap;
    if (map[""] === undefined) super.zero({});
    const s = map[""] as Series;
    s.sum = this.sum;
    s.count = this.count;
    for (let i = 0; i < this.keys.length; i++) s.bucketValues[this.keys[i] as string] = this.counts[i] as number;
  }

  /** From now on prom-client keeps the series (with what was counted here). */
  private handOver(): void {
    if (!this.own) return;
    this.flush();
    this.own = false;
    (this as unknown as { observe: Observe }).observe = this.promObserve;
  }

  /** What the registry reads at a scrape (`get()` reads it too): the series written first. */
  async getForPromString(): Promise<unknown> {
    this.flush();
    return (Histogram.prototype as unknown as { getForPromString(): Promise<unknown> }).getForPromString.call(this);
  }

  override reset(): void {
    super.reset();
    // prom-client's constructor resets too, before this one's fields exist.
    (this.counts as Float64Array | undefined)?.fill(0);
    this.sum = 0;
    this.count = 0;
    this.live = false;
  }

  override zero(labels: Partial<Record<string, string | number>>): void {
    this.handOver();
    super.zero(labels);
  }

  override labels(...args: unknown[]): Histogram.Internal<string> {
    this.handOver();
    return (Histogram.prototype.labels as (...a: unknown[]) => Histogram.Internal<string>).apply(this, args);
  }

  override remove(...args: unknown[]): void {
    this.handOver();
    (Histogram.prototype.remove as (...a: unknown[]) => void).apply(this, args);
  }
}
