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
 * The canonical key of a descriptor: its entries as `key=value`, joined by `|`, in the order
 * given (the order is part of a descriptor's meaning, as in Envoy). It is what overrides are
 * stored under and what `GET /v1/keys/...` takes.
 * Rule keys may not contain `=` or `|` (the rules schema forbids them). Values are kept verbatim
 * (short, printable, and equal to what operators type into overrides); so the text form of a
 * descriptor whose value contains `|` cannot be parsed back by {@link parseDescriptorKey}
 * (`GET /v1/keys`, `/v1/auth`): send such descriptors as JSON to `POST /v1/check` instead.
 * @example descriptorKey([{ key: "remote_address", value: "1.2.3.4" }, { key: "path", value: "/api" }]) // "remote_address=1.2.3.4|path=/api"
 */
export function descriptorKey(entries: readonly DescriptorEntry[]): string {
  if (entries.length === 1) {
    const e = entries[0] as DescriptorEntry;
    return `${e.key}=${e.value}`;
  }
  let s = "";
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as DescriptorEntry;
    s += i === 0 ? `${e.key}=${e.value}` : `|${e.key}=${e.value}`;
  }
  return s;
}

/**
 * Parses a canonical descriptor key back into entries (for `GET /v1/keys/<domain>/<key>`).
 * @returns undefined when the text is not `key=value(|key=value)*`
 * @example parseDescriptorKey("user_id=42") // [{ key: "user_id", value: "42" }]
 */
export function parseDescriptorKey(text: string): DescriptorEntry[] | undefined {
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
