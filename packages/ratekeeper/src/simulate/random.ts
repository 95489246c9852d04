/**
 * A small seeded pseudo-random generator, so that a simulated traffic pattern is the same on
 * every run and every machine. SplitMix32 (the 32-bit variant of Vigna's SplitMix64 finaliser):
 * a counter stepped by the golden-ratio constant and mixed; statistically good enough for
 * generating arrival times, and tiny.
 */
export class Random {
  private s: number;

  /** @param seed any integer; the same seed gives the same sequence. */
  constructor(seed: number) {
    this.s = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.s = (this.s + 0x9e3779b9) >>> 0;
    let z = this.s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    z ^= z >>> 16;
    return (z >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** The gap to the next arrival of a Poisson process with `ratePerMs` arrivals per ms (exponential). */
  gapMs(ratePerMs: number): number {
    return -Math.log(1 - this.next()) / ratePerMs;
  }
}
