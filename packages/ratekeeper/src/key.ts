import { describeValue } from "./core/errors.js";

/** `String.prototype.isWellFormed` (ES2024; in every Node this library supports). */
interface WellFormed {
  isWellFormed(): boolean;
}

/**
 * Throws a RangeError naming `key` unless it is a non-empty, well-formed string of at most 1024
 * characters: the keys every limiter accepts, the same for every store.
 */
export function checkKey(key: unknown): void {
  if (typeof key !== "string" || key.length === 0 || key.length > 1024) badKey(key);
  // A lone surrogate: Redis clients send keys as UTF-8, where each becomes U+FFFD, so such
  // keys would collide in Redis and not in memory. Refused by every store alike. (One-byte
  // strings, the usual keys, answer at once.)
  if (!(key as unknown as WellFormed).isWellFormed()) illFormedKey(key);
}

function illFormedKey(key: string): never {
  let at = 0;
  for (; at < key.length; at++) {
    const c = key.charCodeAt(at);
    if (c >= 0xd800 && c <= 0xdbff && at + 1 < key.length && (key.charCodeAt(at + 1) & 0xfc00) === 0xdc00) at++;
    else if (c >= 0xd800 && c <= 0xdfff) break;
  }
  const unit = key.charCodeAt(at).toString(16).toUpperCase();
  throw new RangeError(
    `key: has a lone surrogate (U+${unit} at index ${at}), which Redis would store as U+FFFD; ` +
      "use well-formed text (key.toWellFormed() replaces lone surrogates with U+FFFD)",
  );
}

function badKey(key: unknown): never {
  throw new RangeError(`key: must be a non-empty string of at most 1024 characters (got ${describeValue(key)})`);
}
