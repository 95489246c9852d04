/**
 * Middleware keys made to fit the limiter's bound on keys (1 to 1024 characters, limiter.ts):
 * a key part the client writes (a header's value, the path) can be longer, and a key the limiter
 * refuses would not be limited at all. A longer key keeps its first characters and gains a hash
 * of the whole, so two long keys that differ only past the cut stay apart.
 */

/** The longest key the limiter takes (key.ts `checkKey`). */
export const MAX_KEY_CHARS = 1024;

/** Characters of a long key kept as they are, before `#` and the 26 of its hash. */
const KEPT_CHARS = 960;

/**
 * A 53-bit hash of `s` (cyrb53: two 32-bit multiply-xorshift lanes), as 11 base-36 digits. Not
 * cryptographic: a client can only make two of its own long keys meet, which limits it harder;
 * to meet another client's key it would have to know that key. Pure TypeScript, so it runs on
 * every runtime the middleware does (no node:crypto, no asynchronous WebCrypto on the hot path).
 */
function hash53(s: string, seed: number): string {
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36).padStart(11, "0");
}

/**
 * `key` when it fits, else its first 960 characters (one fewer when the cut would split a
 * surrogate pair), `#`, and two 53-bit hashes of the whole key.
 * @example fitKey("x-api-key=" + "k".repeat(2000)).length // 983
 */
export function fitKey(key: string): string {
  if (key.length <= MAX_KEY_CHARS) return key;
  const high = key.charCodeAt(KEPT_CHARS - 1);
  const cut = high >= 0xd800 && high <= 0xdbff ? KEPT_CHARS - 1 : KEPT_CHARS;
  return `${key.slice(0, cut)}#${hash53(key, 0)}${hash53(key, 0x9e3779b9)}`;
}
