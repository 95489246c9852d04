/**
 * The decision API's requests read into a {@link CheckInput}: a JSON check (`POST /v1/check`),
 * a `GET /v1/auth` request (query string and `X-RateLimit-*` headers, for nginx), a
 * `GET /v1/keys/...` path. Each is checked against the request-shape caps of
 * service/request-caps.ts, and every problem is a CheckError naming the field (a 400).
 */
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { DescriptorEntry } from "../config/match.js";
import { parseDescriptorKey } from "../service/descriptor-key.js";
import { checkShape, type RequestShape } from "../service/request-caps.js";
import { CheckError, type CheckInput } from "../service/types.js";

/** `X-RateLimit-Descriptor-1` ... `-9`: further descriptors for `/v1/auth`, in order. */
const NUMBERED_DESCRIPTOR_HEADERS = Array.from({ length: 9 }, (_, i) => `x-ratelimit-descriptor-${i + 1}`);

/** The `/v1/auth` deny status. nginx's auth_request accepts only 2xx, 401 and 403 from the subrequest. */
const DENY_STATUSES = new Set([429, 403, 401]);

/** Descriptors already read into entries, named as in the JSON (`descriptors[0][1]`) or by position (`/v1/auth`). */
export function entryShape(list: string): RequestShape<readonly DescriptorEntry[]> {
  return { entriesOf: (d) => d, descriptors: list, entries: (i) => `${list}[${i}]` };
}

/**
 * A query string, parsed once into a small map (URLSearchParams and its unescaping were a few
 * percent of a /v1/auth CPU profile; most queries here have nothing to decode). Same decoding
 * (`+` is a space, then percent-decoding); a malformed escape is a 400.
 */
export class Query {
  /** Names and values, alternating: a handful of parameters is faster to scan than to hash. */
  private readonly pairs: string[] = [];
  constructor(text: string) {
    if (text.length === 0) return;
    let from = 0;
    while (from <= text.length) {
      let to = text.indexOf("&", from);
      if (to === -1) to = text.length;
      if (to > from) {
        const eq = text.indexOf("=", from);
        if (eq === -1 || eq > to) this.pairs.push(decode(text.slice(from, to)), "");
        else this.pairs.push(decode(text.slice(from, eq)), decode(text.slice(eq + 1, to)));
      }
      from = to + 1;
    }
  }
  get(name: string): string | null {
    const p = this.pairs;
    for (let i = 0; i < p.length; i += 2) if (p[i] === name) return p[i + 1] as string;
    return null;
  }
  getAll(name: string): string[] {
    const out: string[] = [];
    const p = this.pairs;
    for (let i = 0; i < p.length; i += 2) if (p[i] === name) out.push(p[i + 1] as string);
    return out;
  }
}

function decode(s: string): string {
  const plus = s.indexOf("+") !== -1;
  if (!plus && s.indexOf("%") === -1) return s;
  try {
    return decodeURIComponent(plus ? s.replace(/\+/g, " ") : s);
  } catch {
    throw new CheckError(`query: bad percent-encoding in ${JSON.stringify(s)}`);
  }
}

/**
 * A cost sent as text (`?cost=` or `X-RateLimit-Cost`): decimal digits only. `Number()` would
 * take "0x10" as 16, "1e2" as 100 and "" as 0, and turn "abc" into NaN (which JSON shows as null).
 */
export function parseCost(text: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(text))
    throw new CheckError(`cost: must be a positive whole number in decimal digits, such as cost=2 (got ${JSON.stringify(text)})`);
  return Number(text);
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** No headers: what {@link authHeaders} gives for a request without `X-RateLimit-*` headers. */
const NO_HEADERS: IncomingHttpHeaders = Object.freeze({});

/**
 * The headers {@link authInput} reads: the request's, when one of them is named `X-RateLimit-*`
 * (any case), else none. Most `/v1/auth` requests send everything in the query string, and the
 * 14 header names authInput would look up are then 14 reads of a dictionary-mode object (about 1.5%
 * of a GET /v1/auth CPU profile); one pass over the raw names is cheaper.
 */
export function authHeaders(req: Pick<IncomingMessage, "rawHeaders" | "headers">): IncomingHttpHeaders {
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i] as string;
    // "x-ratelimit-": 'x' or 'X', then "-ratelimit-" in any case.
    if (n.length > 12 && (n.charCodeAt(0) | 0x20) === 0x78 && n.charCodeAt(1) === 0x2d && n.slice(2, 12).toLowerCase() === "ratelimit-")
      return req.headers;
  }
  return NO_HEADERS;
}

/** A `/v1/auth` request: the check, and the status to deny with. */
export function authInput(query: Query, h: IncomingHttpHeaders): { input: CheckInput; denyStatus: number } {
  const denyStatus = Number(query.get("deny_status") ?? h["x-ratelimit-deny-status"] ?? 429);
  if (!DENY_STATUSES.has(denyStatus)) throw new CheckError("deny_status: must be 429, 403 or 401");
  const domain = query.get("domain") ?? header(h["x-ratelimit-domain"]);
  const costText = query.get("cost") ?? header(h["x-ratelimit-cost"]);
  const cost = costText === undefined ? undefined : parseCost(costText);
  const key = query.get("key") ?? header(h["x-ratelimit-key"]);
  if (key !== undefined) {
    return {
      input: { domain: domain ?? undefined, key, policy: query.get("policy") ?? header(h["x-ratelimit-policy"]), cost },
      denyStatus,
    };
  }
  const texts = query.getAll("d");
  const one = header(h["x-ratelimit-descriptor"]);
  if (one !== undefined) texts.push(one);
  for (const name of NUMBERED_DESCRIPTOR_HEADERS) {
    const t = header(h[name]);
    if (t !== undefined) texts.push(t);
  }
  if (texts.length === 0)
    throw new CheckError("descriptors: give ?d=key=value|key=value or X-RateLimit-Descriptor headers (or a key and a policy)");
  const descriptors = texts.map((t, i) => {
    const entries = parseDescriptorKey(t);
    if (!entries) throw new CheckError(`descriptor ${i}: ${JSON.stringify(t)} must be key=value, several joined by |`);
    return entries;
  });
  checkShape(domain, descriptors, entryShape("descriptors"));
  return { input: { domain: domain ?? undefined, descriptors, cost }, denyStatus };
}

/** `GET /v1/keys/<domain>/<descriptor key>` (or `<key>?policy=<name>`), the part after `/v1/keys/`. */
export function keysInput(rest: string, query: Query): CheckInput {
  const slash = rest.indexOf("/");
  if (slash <= 0 || slash === rest.length - 1)
    throw new CheckError("path: use /v1/keys/<domain>/<descriptor key, e.g. user_id=42> or /v1/keys/<domain>/<key>?policy=<name>");
  let domain: string;
  let key: string;
  try {
    domain = decodeURIComponent(rest.slice(0, slash));
    key = decodeURIComponent(rest.slice(slash + 1));
  } catch {
    throw new CheckError("path: bad percent-encoding");
  }
  const policy = query.get("policy");
  if (policy !== null) return { domain, key, policy };
  const entries = parseDescriptorKey(key);
  if (!entries)
    throw new CheckError(
      `path: ${JSON.stringify(key)} is not a descriptor key (key=value, several joined by |); for a plain key add ?policy=<name>`,
    );
  checkShape(domain, [entries], entryShape("descriptors"));
  return { domain, descriptors: [entries] };
}

/** The checks of a batch body (`{"checks": [...]}` or a JSON array), or undefined for a single check. */
export function batchOf(body: unknown): unknown[] | undefined {
  if (Array.isArray(body)) return body as unknown[];
  return isObject(body) && Array.isArray(body.checks) ? (body.checks as unknown[]) : undefined;
}

const INPUT_KEYS = new Set(["domain", "descriptors", "key", "policy", "cost"]);

/**
 * Validates one check's JSON (`at` is its path in a batch, e.g. `checks[3].`). Descriptors are
 * either lists of `{key, value}` entries (Envoy's shape) or objects whose properties are the
 * entries in order (`{"remote_address": "1.2.3.4", "path": "/api"}`).
 */
export function toInput(body: unknown, at: string): CheckInput {
  if (!isObject(body)) throw new CheckError(`${at || "body"}: must be a JSON object (or a batch: {"checks": [...]})`);
  for (const k of Object.keys(body))
    if (!INPUT_KEYS.has(k)) throw new CheckError(`${at}${k}: unknown field (known: ${[...INPUT_KEYS].join(", ")}, or checks for a batch)`);
  const { domain, descriptors, key, policy, cost } = body;
  if (domain !== undefined && (typeof domain !== "string" || domain.length === 0))
    throw new CheckError(`${at}domain: must be a non-empty string`);
  // The cost is passed on as sent: the decision service checks it (one place for every transport).
  if (key !== undefined) {
    if (typeof key !== "string") throw new CheckError(`${at}key: must be a string`);
    if (descriptors !== undefined) throw new CheckError(`${at}: give descriptors or a key, not both`);
    if (typeof policy !== "string") throw new CheckError(`${at}policy: a plain key needs the name of a policy`);
    return { domain, key, policy, cost: cost as number | undefined };
  }
  if (typeof domain !== "string") throw new CheckError(`${at}domain: required with descriptors`);
  if (!Array.isArray(descriptors) || descriptors.length === 0) throw new CheckError(`${at}descriptors: must be a non-empty list`);
  // (The body is at most --max-body bytes, so reading every descriptor before checking the caps is bounded work.)
  const out: DescriptorEntry[][] = [];
  for (let i = 0; i < descriptors.length; i++) out.push(entriesOf(descriptors[i], `${at}descriptors[${i}]`));
  checkShape(domain, out, entryShape(`${at}descriptors`));
  return { domain, descriptors: out, cost: cost as number | undefined };
}

/** One JSON descriptor's entries: a list of `{key, value}`, or an object of `key: value`. */
function entriesOf(d: unknown, p: string): DescriptorEntry[] {
  const entries: DescriptorEntry[] = [];
  if (Array.isArray(d)) {
    for (let j = 0; j < d.length; j++) {
      const e: unknown = d[j];
      if (!isObject(e) || typeof e.key !== "string" || typeof e.value !== "string" || e.key.length === 0 || e.value.length === 0) {
        throw new CheckError(`${p}[${j}]: must be {"key": "...", "value": "..."} with non-empty strings`);
      }
      entries.push({ key: e.key, value: e.value });
    }
  } else if (isObject(d)) {
    for (const k of Object.keys(d)) {
      const v = d[k];
      if (typeof v !== "string" || v.length === 0 || k.length === 0) throw new CheckError(`${p}.${k}: must be a non-empty string`);
      entries.push({ key: k, value: v });
    }
  } else throw new CheckError(`${p}: must be a list of {key, value} entries or an object of key: value`);
  if (entries.length === 0) throw new CheckError(`${p}: needs at least one entry`);
  return entries;
}
