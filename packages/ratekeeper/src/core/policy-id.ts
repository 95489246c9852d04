import type { ResolvedLimit } from "./options.js";

/**
 * A short, stable id for a set of limits (FNV-1a over their defining fields), used as the
 * default namespace: servers running the same policy share state; different policies never do.
 */
export function policyId(limits: readonly ResolvedLimit[]): string {
  const text = limits
    .map((l) => [l.algorithmId, l.limit, l.windowMs, l.capacity, l.buckets, +l.weighted, +l.alignFirst].join(","))
    .join(";");
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(36);
}
