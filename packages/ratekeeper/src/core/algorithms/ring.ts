/**
 * The sliding window's ring (its sub-window counts, and their total): a plain JS array when it is
 * small, a Float64Array when it is large (docs/benchmarks/memory.md, "Rings of two kinds"). The
 * sliding log keeps its times in a Float64Array of its own (sliding-log.ts), whatever its size.
 *
 * Small ({@link SMALL_RING} slots or fewer: a sliding window of up to 62 sub-windows, or of one
 * whose limit is above 32,767): V8 keeps an array of small integers (Smis: every count) in one
 * backing store inside the JS heap, about 48 bytes of overhead in all, where a Float64Array is
 * three objects (about 184 bytes) and a second cache miss per decision. A count above 2^31 turns
 * that array's elements into doubles, still exact.
 *
 * Large: a Float64Array, whose data lives outside the JS heap. A flood of keys with large rings
 * kept as JS arrays (a sliding log's 500 units, b1159f9) grew the old generation by the store's
 * whole bound, and V8 sizes its next limit from it: the service's RSS under such a flood nearly
 * doubled. A Float64Array's data is freed with its buffer and counted as external memory, which
 * makes V8 collect sooner. One table's rings are all of one kind (the ring's length is fixed by
 * the limit), so a process with no window of more than 62 sub-windows reads only arrays there.
 *
 * Why the sliding log's small rings are not arrays too: its ring grows with a key's traffic, so
 * one table would hold both kinds, and every ring read of the log would see two (measured: a
 * log whose rings grow past 64 slots was 10-20% slower in no order than with Float64Arrays alone).
 *
 * A small array is made by `slice` of a template, so that it is packed (`new Array(n)` is holey),
 * exactly `n` long, and carries no allocation-site feedback: an array made from a literal that
 * later held a double would make V8 create every later array of that literal with double
 * elements, those of the memory store included.
 */
export type Ring = number[] | Float64Array;

/** The most slots a ring kept as a JS array has. */
export const SMALL_RING = 64;

/** A new ring of `n` zeros: a JS array of up to {@link SMALL_RING} slots, else a Float64Array. */
export function newRing(n: number): Ring {
  return n <= SMALL_RING ? TEMPLATE.slice(0, n) : new Float64Array(n);
}

const TEMPLATE: readonly number[] = Array.from({ length: SMALL_RING }, () => 0);
