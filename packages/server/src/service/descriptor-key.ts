import { createHash } from "node:crypto";
import type { DescriptorEntry } from "../config/match.js";

/** The longest state or stat key kept as it is. */
export const MAX_KEY_CHARS = 512;

/**
 * A key of at most {@link MAX_KEY_CHARS} characters: a longer one (Envoy's RLS takes values as
 * long as request paths) becomes its first 440 characters, `#sha256:` and the SHA-256 of the
 * whole key, so every instance counts it under the same key, distinct keys stay distinct, and
 * what the stores, overrides cache, dashboard and stats hold per key stays bounded.
 * @example boundedKey("path=/a") // "path=/a"
 */
export function boundedKey(key: string): string {
  if (key.length <= MAX_KEY_CHARS) return key;
  return `${key.slice(0, 440)}#sha256:${createHash("sha256").update(key).digest("base64url")}`;
}

/**
 * The state key of `key` in `domain`: what counters are kept under (and the dashboard's top denied
 * keys name). An ordinary domain gives `<domain>|<key>`, as always. Both parts may come from a
 * client (a plain-key check's domain and key are the caller's), so a domain holding `|` would
 * shift into the key: domain `a|b` with key `c` and domain `a` with key `b|c` would share a
 * counter. Such a domain, and an empty one, is written `|<its length>|<domain>|<key>`, a form no
 * ordinary domain's key takes (it starts with `|`), and {@link splitStateKey} reads both back.
 * @example stateKey("web", "user|42") // "web|user|42"
 * @example stateKey("a|b", "c") // "|3|a|b|c"
 */
export function stateKey(domain: string, key: string): string {
  return domain.length !== 0 && domain.indexOf("|") === -1 ? `${domain}|${key}` : `|${domain.length}|${domain}|${key}`;
}

/** The domain and key of a {@link stateKey}. */
export function splitStateKey(state: string): { domain: string; key: string } {
  if (state.charCodeAt(0) !== 0x7c /* | */) {
    const bar = state.indexOf("|");
    return { domain: state.slice(0, bar), key: state.slice(bar + 1) };
  }
  const bar = state.indexOf("|", 1);
  const end = bar + 1 + Number(state.slice(1, bar));
  return { domain: state.slice(bar + 1, end), key: state.slice(end + 1) };
}

/**
 * The canonical key of a descriptor: its entries as `key=value`, joined by `|`, in the order
 * given (the order is part of a descriptor's meaning, as in Envoy). It is what counters and
 * overrides are kept under and what `GET /v1/keys/...` takes, so it names one descriptor only.
 * Rule keys may not contain `=` or `|` (the rules schema forbids them), but values, and the keys
 * of descriptors no rule names, may come from a client (a header Envoy copies): a value such as
 * `alice|plan=gold` must not make the key of the two entries `user=alice`, `plan=gold` (their
 * override, their counters). So a descriptor with `|` in a value, or `|` or `=` in a key, is
 * written `|` + the JSON of its `[key, value]` pairs (`|[["user","alice|plan=gold"]]`), a form no
 * plain descriptor's key takes (a plain key never starts with `|`). Every other descriptor keeps
 * the plain form, verbatim (what operators type into overrides).
 * @example descriptorKey([{ key: "remote_address", value: "1.2.3.4" }, { key: "path", value: "/api" }]) // "remote_address=1.2.3.4|path=/api"
 * @example descriptorKey([{ key: "user", value: "a|b" }]) // '|[["user","a|b"]]'
 */
export function descriptorKey(entries: readonly DescriptorEntry[]): string {
  if (entries.length === 1) {
    // The common case, checked on the key itself: no `|`, and its first `=` the one put there
    // (this flattens the string, which the store's map lookup does anyway).
    const e = entries[0] as DescriptorEntry;
    const s = `${e.key}=${e.value}`;
    return s.indexOf("|") === -1 && s.indexOf("=") === e.key.length ? s : quotedKey(entries);
  }
  let s = "";
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as DescriptorEntry;
    s += i === 0 ? `${e.key}=${e.value}` : `|${e.key}=${e.value}`;
  }
  // Plain when each entry's first `=` and the `|` after it are the ones put there.
  for (let i = 0, at = 0; i < entries.length; i++) {
    const e = entries[i] as DescriptorEntry;
    const end = at + e.key.length + 1 + e.value.length;
    if (s.indexOf("=", at) !== at + e.key.length || s.indexOf("|", at) !== (i === entries.length - 1 ? -1 : end)) return quotedKey(entries);
    at = end + 1;
  }
  return s;
}

/** The quoted form: `|` and the JSON of the `[key, value]` pairs. */
function quotedKey(entries: readonly DescriptorEntry[]): string {
  return `|${JSON.stringify(entries.map((e) => [e.key, e.value]))}`;
}

/** The entries of a quoted key (`|[["k","v"],...]`), or undefined when it is not one. */
function parseQuotedKey(text: string): DescriptorEntry[] | undefined {
  let pairs: unknown;
  try {
    pairs = JSON.parse(text.slice(1));
  } catch {
    return undefined;
  }
  if (!Array.isArray(pairs) || pairs.length === 0) return undefined;
  const out: DescriptorEntry[] = [];
  for (const p of pairs as unknown[]) {
    if (!Array.isArray(p) || p.length !== 2 || typeof p[0] !== "string" || p[0].length === 0 || typeof p[1] !== "string") return undefined;
    out.push({ key: p[0], value: p[1] });
  }
  return out;
}

/**
 * Parses a canonical descriptor key back into entries (for `GET /v1/keys/<domain>/<key>`), the
 * quoted form (`|[["k","v"]]`) too. In the plain form `|` always separates entries, so a value
 * put into a template by a proxy (`remote_address=$remote_addr|path=$path`) cannot add entries of
 * its own unless it holds `|` (the nginx example stops a path at the first `|`).
 * @returns undefined when the text is not `key=value(|key=value)*` nor a quoted key
 * @example parseDescriptorKey("user_id=42") // [{ key: "user_id", value: "42" }]
 */
export function parseDescriptorKey(text: string): DescriptorEntry[] | undefined {
  if (text.charCodeAt(0) === 0x7c /* | */) return parseQuotedKey(text);
  const out: DescriptorEntry[] = [];
  // Scanned with indexOf, not split("|"): no array of parts per request (/v1/auth parses one per check).
  for (let from = 0; from <= text.length;) {
    let to = text.indexOf("|", from);
    if (to === -1) to = text.length;
    const eq = text.indexOf("=", from);
    if (eq <= from || eq >= to - 1) return undefined;
    out.push({ key: text.slice(from, eq), value: text.slice(eq + 1, to) });
    from = to + 1;
  }
  return out;
}
