/**
 * The common `POST /v1/check` body read straight into a {@link CheckInput}, without `JSON.parse`:
 * `{"domain": "...", "descriptors": [...], "cost": n}` with plain strings. Anything else (a
 * batch, a plain key, escapes, non-ASCII, duplicate names, numbers that are not small whole
 * ones, any field the general path would refuse) is declined, and the caller takes the general
 * path (`JSON.parse`, then `toInput`), which answers it, or its error, as before. So the fast path
 * gives what the general path gives or nothing (test/check-body.test.ts compares them).
 *
 * Why: `JSON.parse` internalises every short string value (a user id, the domain) into V8's string
 * table and builds an object `toInput` then walks and copies; a CPU profile of the service under
 * `POST /v1/check` load had the string table's lookups and the parse at 2-3% each, and leaving
 * `JSON.parse` out cut the server's CPU per check by about 3 us (docs/benchmarks/service.md).
 */
import type { DescriptorEntry } from "../config/match.js";
import { checkShape, REQUEST_CAPS } from "../service/request-caps.js";
import type { CheckInput } from "../service/types.js";
import { entryShape } from "./check-input.js";

const SHAPE = entryShape("descriptors");

/** The body being read and the position in it: the read is synchronous, so one pair serves every request. */
let src = "";
let pos = 0;

/**
 * A single check's input read from its body text, or undefined to take the general path.
 * @throws CheckError from the request-shape caps, as `toInput` would for the same body
 */
export function checkBodyInput(text: string): CheckInput | undefined {
  src = text;
  pos = 0;
  const input = readCheck();
  src = "";
  if (input === undefined) return undefined;
  checkShape(input.domain, input.descriptors, SHAPE);
  return input;
}

/** Skips JSON whitespace; the character code there (NaN at the end). */
function ws(): number {
  let c = src.charCodeAt(pos);
  while (c === 32 || c === 10 || c === 13 || c === 9) c = src.charCodeAt(++pos);
  return c;
}

/** A non-empty string of printable ASCII with no escapes, after whitespace; else undefined. */
function text(): string | undefined {
  if (ws() !== 34 /* " */) return undefined;
  const from = ++pos;
  let c = src.charCodeAt(pos);
  while (c !== 34) {
    // A backslash, a control or non-ASCII character, or the end: the general path.
    if (!(c >= 0x20 && c <= 0x7e) || c === 92) return undefined;
    c = src.charCodeAt(++pos);
  }
  if (pos === from) return undefined;
  return src.slice(from, pos++);
}

/** After whitespace, `c` (consumed): true; otherwise false. */
function take(c: number): boolean {
  if (ws() !== c) return false;
  pos++;
  return true;
}

interface FastInput {
  readonly domain: string;
  readonly descriptors: DescriptorEntry[][];
  readonly cost: number | undefined;
}

function readCheck(): FastInput | undefined {
  if (!take(123 /* { */)) return undefined;
  let domain: string | undefined;
  let descriptors: DescriptorEntry[][] | undefined;
  let cost: number | undefined;
  let costSeen = false;
  do {
    const name = text();
    if (name === undefined || !take(58 /* : */)) return undefined;
    if (name === "domain" && domain === undefined) {
      if ((domain = text()) === undefined) return undefined;
    } else if (name === "descriptors" && descriptors === undefined) {
      if ((descriptors = readDescriptors()) === undefined) return undefined;
    } else if (name === "cost" && !costSeen) {
      costSeen = true;
      if ((cost = count()) === undefined) return undefined;
    } else return undefined;
  } while (take(44 /* , */));
  if (!take(125 /* } */) || !Number.isNaN(ws()) || domain === undefined || descriptors === undefined) return undefined;
  return { domain, descriptors, cost };
}

/** `[descriptor, ...]`, at least one. */
function readDescriptors(): DescriptorEntry[][] | undefined {
  if (!take(91 /* [ */)) return undefined;
  const out: DescriptorEntry[][] = [];
  do {
    const c = ws();
    const d = c === 123 ? objectEntries() : c === 91 ? listEntries() : undefined;
    // Past the cap: the general path refuses it (see objectEntries).
    if (d === undefined || out.length === REQUEST_CAPS.descriptors) return undefined;
    out.push(d);
  } while (take(44));
  return take(93 /* ] */) ? out : undefined;
}

/**
 * `{"name": "value", ...}`, at least one. Declined: a repeated name (JSON.parse keeps the last
 * value), a name starting with a digit (an array index: Object.keys puts those first, in numeric
 * order), `__proto__`, and more entries than the request caps allow, before they are read: the
 * scan for a repeated name is quadratic (a 64 KB body of 5,000 entries cost 50 ms here, where
 * the general path refuses it in 3 ms).
 */
function objectEntries(): DescriptorEntry[] | undefined {
  pos++;
  const entries: DescriptorEntry[] = [];
  do {
    const key = text();
    if (key === undefined || !take(58)) return undefined;
    const k0 = key.charCodeAt(0);
    if ((k0 >= 48 && k0 <= 57) || key === "__proto__") return undefined;
    if (entries.length === REQUEST_CAPS.entries) return undefined;
    for (let i = 0; i < entries.length; i++) if ((entries[i] as DescriptorEntry).key === key) return undefined;
    const value = text();
    if (value === undefined) return undefined;
    entries.push({ key, value });
  } while (take(44));
  return take(125) ? entries : undefined;
}

/** `[{"key": "...", "value": "..."}, ...]`, at least one; an entry has those two names and no others. */
function listEntries(): DescriptorEntry[] | undefined {
  pos++;
  const entries: DescriptorEntry[] = [];
  do {
    if (!take(123)) return undefined;
    let key: string | undefined;
    let value: string | undefined;
    for (let n = 0; n < 2; n++) {
      if (n === 1 && !take(44)) return undefined;
      const name = text();
      if (name === undefined || !take(58)) return undefined;
      if (name === "key" && key === undefined) {
        if ((key = text()) === undefined) return undefined;
      } else if (name === "value" && value === undefined) {
        if ((value = text()) === undefined) return undefined;
      } else return undefined;
    }
    if (key === undefined || value === undefined || !take(125) || entries.length === REQUEST_CAPS.entries) return undefined;
    entries.push({ key, value });
  } while (take(44));
  return take(93) ? entries : undefined;
}

/** A whole number written as JSON writes it (`0`, or up to 15 digits with no leading zero); else undefined. */
function count(): number | undefined {
  let c = ws();
  const from = pos;
  if (c === 48 /* 0 */) c = src.charCodeAt(++pos);
  else while (c >= 48 && c <= 57 && pos - from < 15) c = src.charCodeAt(++pos);
  // A fraction, an exponent, more digits, or none: the general path.
  if (pos === from || (c >= 48 && c <= 57) || c === 46 || c === 101 || c === 69) return undefined;
  return Number(src.slice(from, pos));
}
