/**
 * JSON strings written by hand, exactly as `JSON.stringify` writes them, for the answers the
 * decision API renders itself (transport/render.ts, service/explain.ts), and the count of
 * UTF-8 bytes that comes free with them: a text made only of plain ASCII strings, numbers and
 * punctuation has as many bytes as characters, so its `content-length` needs no
 * `Buffer.byteLength`, which flattens the concatenated text a second time (node's write flattens
 * it again with the headers in front).
 */

/**
 * Printable ASCII other than `"` and backslash: what `JSON.stringify` leaves as it is, one byte
 * each in UTF-8. Anything else (controls, quotes, non-ASCII, surrogates) is quoted by
 * `JSON.stringify` itself, which is right by definition.
 */
const PLAIN = /^[ !#-\x5b\x5d-~]*$/;

/** Whether every string quoted since {@link startAscii} was plain (see {@link PLAIN}). */
let ascii = true;

/** Starts counting: until {@link endAscii}, every string quoted here is looked at. */
export function startAscii(): void {
  ascii = true;
}

/**
 * Whether the text rendered since {@link startAscii} is plain ASCII, provided its own punctuation
 * and numbers are: then its length is its byte length.
 */
export function endAscii(): boolean {
  return ascii;
}

/** Marks the text being rendered as not (known to be) plain ASCII: its byte length must be counted. */
export function notAscii(): void {
  ascii = false;
}

/**
 * `JSON.stringify(s)` for a string: one that needs no escaping (nearly all: keys, rule names,
 * policy names) is put between quotes as it is.
 */
export function jsonString(s: string): string {
  if (PLAIN.test(s)) return `"${s}"`;
  ascii = false;
  return JSON.stringify(s);
}

/**
 * {@link jsonString} without its quotes, for a piece of a longer string. Pieces may be joined
 * when they meet at ASCII characters: `JSON.stringify` escapes character by character except for
 * surrogate pairs, which a join between two pieces could create or split.
 */
export function jsonInner(s: string): string {
  if (PLAIN.test(s)) return s;
  ascii = false;
  return JSON.stringify(s).slice(1, -1);
}

/** Whether a string is plain ASCII that JSON writes as it is (see {@link PLAIN}). */
export function isPlain(s: string): boolean {
  return PLAIN.test(s);
}
