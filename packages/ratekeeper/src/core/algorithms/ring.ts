/**
 * A new ring of `n` zeros: a plain JS array (`number[]`), not a typed array. V8 keeps an array of
 * small integers (Smis: every count, and every time relative to a memory table's base,
 * stores/memory-time.ts) in one backing store inside the JS heap, about 48 bytes of overhead in
 * all, where a Float64Array is three objects (about 184 bytes, its data off the heap past 64
 * bytes) and a second cache miss per decision. A number that is not a small integer (a count
 * above 2^31, an absolute time) turns that array's elements into doubles, still exact.
 *
 * The array is made by `slice` of a template, so that it is packed (`new Array(n)` is holey),
 * exactly `n` long (an array grown by `push` keeps slack), and carries no allocation-site
 * feedback: an array made from a literal that later held a double would make V8 create every
 * later array of that literal with double elements, those of the memory store included.
 */
export function zeros(n: number): number[] {
  if (n <= TEMPLATE.length) return TEMPLATE.slice(0, n);
  const r = TEMPLATE.slice();
  while (r.length < n) r.push(0);
  return r.slice(); // exactly n long: push left slack
}

const TEMPLATE: readonly number[] = Array.from({ length: 64 }, () => 0);
