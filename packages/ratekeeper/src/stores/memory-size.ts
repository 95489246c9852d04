/**
 * How many bytes a key takes in a {@link MemoryStore}: an estimate from a model calibrated on
 * V8 (Node 20, 64-bit, no pointer compression) by `node --expose-gc bench/memory-per-key.js`,
 * which floods a store with fresh keys and compares the growth of the JS heap plus external
 * memory (after gc) with the store's own estimate. docs/security.md has the measured table.
 *
 * The parts, per key:
 * - the key string: a 16-byte header plus its characters, one byte each (two for a key with any
 *   character above U+00FF), rounded up to 8; plus, from 13 characters on, a 32-byte cons cell:
 *   keys are usually built by concatenation (`"ip:" + addr`), which V8 does with a cons string
 *   from that length, and the map keeps the cell after flattening it;
 * - the table entry (stores/key-index.ts: a 4-byte slot in a table kept 25-50% full, and the
 *   key, value and hash in three dense arrays that grow by doubling; the estimate still allows
 *   for the 8-byte slots of before, 8-16 bytes a key more than now);
 * - the state object (`Slot`: four fields, small integers kept in the object: memory-time.ts),
 *   plus room for one 16-byte number box: V8 boxes a field in every state of the process once one
 *   state holds a number that is not a small integer there (a bucket's level when capacity times
 *   window over gcd(window, limit) reaches 2^31, core/algorithms/bucket.ts, or any time about 12
 *   days after a table's first reading); the sliding log's and several-sub-window tables' states
 *   hold their last denial too (16 bytes);
 * - a ring, for the sliding log and the sliding window (a sliding window of one sub-window and
 *   a limit up to 32,767 keeps its counts in the state object, with no ring): a sliding window's
 *   of up to 64 slots is a JS array, 48 bytes of objects (the array, 32, and its elements'
 *   header, 16); a larger one, and the sliding log's, a `Float64Array`, about 180 bytes of
 *   objects (typed array, array buffer, backing store); plus 8 bytes a slot
 *   (core/algorithms/ring.ts); a sliding window of up to 62 sub-windows keeps its counts in its
 *   table's rows instead (memory-rows.ts), no object, {@link ROW_BYTES} a count.
 * Several limits on one key add an `Entry` and an array of slots.
 *
 * The estimate is within about 20-30% of what was measured for every algorithm (the measure
 * itself moves ±10% between processes: test/memory-bytes.test.ts), larger, and still
 * not smaller with the one box it allows for (docs/security.md); it is what `maxBytes` bounds. It cannot see the allocator's own slack or garbage
 * not collected yet, so a process's RSS is larger than the estimate by a margin that does not
 * grow with the number of keys.
 */
import type { LimitState } from "../core/algorithms/types.js";

/** The map entry, the state object and room for one number box: one limit on a key. */
export const SLOT_BYTES = 112;
/** The last denial a sliding log's or several-sub-window table's state keeps (stores/memory-kinds.ts). */
export const DENIAL_BYTES = 16;
/** The extra objects of a key with several limits: the entry and its array of slots (plus 8 a slot). */
export const ENTRY_BYTES = 32;
/** A small ring's objects (a JS array and its elements' header), without its slots. */
export const SMALL_RING_BYTES = 48;
/** A large ring's objects (a `Float64Array`, its buffer and backing store), without its slots. */
export const RING_BYTES = 184;

/**
 * A row's bytes a number (stores/memory-rows.ts: a sliding window's ring counts in its index's
 * Float64Array): 8, and half as much again for the room the rows grow into (by half: key-index.ts).
 */
export const ROW_BYTES = 12;

/** Bytes of a key string (see the module comment). */
export function keyBytes(key: string): number {
  let wide = false;
  for (let i = 0; i < key.length; i++) {
    if (key.charCodeAt(i) > 0xff) {
      wide = true;
      break;
    }
  }
  const chars = wide ? 2 * key.length : key.length;
  return 16 + ((chars + 7) & ~7) + (key.length >= 13 ? 32 : 0);
}

/** Bytes of one limit's state beyond {@link SLOT_BYTES}: its ring, if it has one. */
export function ringBytes(s: LimitState): number {
  const ring = s.ring;
  if (ring === null) return 0;
  return (Array.isArray(ring) ? SMALL_RING_BYTES : RING_BYTES) + 8 * ring.length;
}
