/**
 * Caps on the shape of a check, the same for every transport: what a proxy sends is small
 * (Envoy: a handful of descriptors of a few entries each), so anything far larger is refused
 * before any work is done for it, with a message naming the field and the cap. Without them one
 * request of 100,000 descriptors did 100,000 decisions (and took hundreds of MB on the way).
 */
import { collectIssues, resolveLimit, type ConfigIssue } from "ratekeeper";
import { CheckError } from "./types.js";

/** The caps, and where each applies. docs/security.md lists them. */
export const REQUEST_CAPS = {
  /** Descriptors in one check (gRPC call, HTTP check or /v1/auth request). */
  descriptors: 64,
  /** Entries (key=value pairs) in one descriptor. */
  entries: 32,
  /** Characters of an entry's key. */
  keyChars: 256,
  /** Characters of an entry's value. */
  valueChars: 512,
  /**
   * Characters of an entry's value in Envoy's RLS (gRPC, `POST /json`): Envoy fills values from
   * request headers and paths (its header limit is 60 KiB), and refusing one fails the whole call,
   * which Envoy's default `failure_mode_deny: false` turns into an allowed request. Longer state
   * keys are stored under a digest (descriptor-key.ts, `boundedKey`).
   */
  rlsValueChars: 65_536,
  /** Characters of the domain. */
  domainChars: 256,
  /** Bytes of one gRPC message (the transport refuses larger ones before decoding them). */
  grpcMessageBytes: 1024 * 1024,
} as const;

/**
 * Distinct limits sent with descriptors (requests_per_unit and unit: Envoy's per-route limit
 * override) that the service takes over its life. Each is decided by a limiter of its own, held
 * for the process's life (a memory store table of ~2.4 KB, outside its byte bound); a proxy sends
 * the few its config names (or one per tenant, from metadata), while a caller choosing a new
 * requests_per_unit per request would grow the process without end. Past the cap a new limit is
 * refused (INVALID_ARGUMENT / 400) and the ones taken keep working. docs/security.md lists it.
 */
export const MAX_CALLER_LIMITS = 10_000;

interface Entryish {
  readonly key?: unknown;
  readonly value?: unknown;
}

/** How a transport's requests are shaped: where the entries are, and how fields are named. */
export interface RequestShape<D> {
  /** A descriptor's entries. */
  entriesOf(descriptor: D): readonly Entryish[] | undefined;
  /** The list of descriptors, e.g. `descriptors` or `checks[3].descriptors`. */
  readonly descriptors: string;
  /** Descriptor `i`'s entries, e.g. `descriptors[0].entries`. */
  entries(i: number): string;
  /** Entry values may be empty (Envoy's proto allows it). @default false */
  readonly emptyValues?: boolean;
  /** Characters of an entry's value. @default REQUEST_CAPS.valueChars */
  readonly valueChars?: number;
}

/** gRPC and `POST /json` (Envoy's RateLimitRequest): `descriptors[i].entries[j]`; values may be empty, as the proto allows. */
export const GRPC_SHAPE: RequestShape<{ readonly entries?: readonly Entryish[] | undefined }> = {
  entriesOf: (d) => d.entries,
  descriptors: "descriptors",
  entries: (i) => `descriptors[${i}].entries`,
  emptyValues: true,
  valueChars: REQUEST_CAPS.rlsValueChars,
};

/** `String.prototype.isWellFormed` (ES2024; in every Node the service supports). */
interface WellFormed {
  isWellFormed(): boolean;
}

/**
 * Throws a CheckError naming `field` (as the caller sent it: `descriptors[0][1].value`) if `text`
 * holds a lone surrogate, with its position in `text`. The library refuses such keys (Redis
 * clients send keys as UTF-8, where each becomes U+FFFD), but its error names `key` and a position
 * in the state key the service builds (`<domain>|<key>=<value>...`), which the caller never sent.
 * One-byte strings, the usual ones, answer at once.
 */
export function checkText(text: string, field: string): void {
  if ((text as unknown as WellFormed).isWellFormed()) return;
  let at = 0;
  for (; at < text.length; at++) {
    const c = text.charCodeAt(at);
    if (c >= 0xd800 && c <= 0xdbff && at + 1 < text.length && (text.charCodeAt(at + 1) & 0xfc00) === 0xdc00) at++;
    else if (c >= 0xd800 && c <= 0xdfff) break;
  }
  const unit = text.charCodeAt(at).toString(16).toUpperCase();
  throw new CheckError(
    `${field}: has a lone surrogate (U+${unit} at index ${at}), which Redis would store as U+FFFD; send well-formed text`,
  );
}

/**
 * Checks a plain key: 1-512 characters of well-formed text.
 * @returns the key
 * @throws CheckError naming `key`
 */
export function checkPlainKey(key: unknown): string {
  if (typeof key !== "string" || key.length === 0 || key.length > 512) throw new CheckError("key: must be a string of 1-512 characters");
  checkText(key, "key");
  return key;
}

/**
 * Checks a domain's length against {@link REQUEST_CAPS}: descriptors' and plain keys' (a longer
 * plain-key domain made a state key the library refused, and the error named the key); and that
 * it is well-formed text ({@link checkText}).
 * @returns the domain
 * @throws CheckError naming `domain`
 */
export function checkDomain(domain: string): string {
  if (typeof domain !== "string" || domain.length > REQUEST_CAPS.domainChars)
    throw new CheckError(
      `domain: at most ${REQUEST_CAPS.domainChars} characters (got ${typeof domain === "string" ? domain.length : typeof domain})`,
    );
  checkText(domain, "domain");
  return domain;
}

/**
 * Checks a check's domain and descriptors against {@link REQUEST_CAPS}; entries must be
 * well-formed strings ({@link checkText}: matched or not, the same for every entry), keys non-empty, values non-empty unless the shape allows empty ones. Reads only lengths first, so a huge request is refused in O(1).
 * @throws CheckError naming the field and the cap (transports answer 400 / INVALID_ARGUMENT)
 */
export function checkShape<D>(domain: unknown, descriptors: readonly D[], names: RequestShape<D>): void {
  if (typeof domain === "string") checkDomain(domain);
  if (descriptors.length > REQUEST_CAPS.descriptors)
    throw new CheckError(`${names.descriptors}: at most ${REQUEST_CAPS.descriptors} per call (got ${descriptors.length})`);
  const minValue = names.emptyValues === true ? 0 : 1;
  const maxValue = names.valueChars ?? REQUEST_CAPS.valueChars;
  for (let i = 0; i < descriptors.length; i++) {
    const entries = names.entriesOf(descriptors[i] as D) ?? [];
    const at = names.entries(i);
    if (entries.length > REQUEST_CAPS.entries)
      throw new CheckError(`${at}: at most ${REQUEST_CAPS.entries} entries (got ${entries.length})`);
    for (let j = 0; j < entries.length; j++) {
      const { key, value: given } = entries[j] as Entryish;
      // proto3 leaves an empty string out: an absent value is the empty one.
      const value = given === undefined && minValue === 0 ? "" : given;
      if (typeof key !== "string" || key.length === 0 || typeof value !== "string" || value.length < minValue)
        throw new CheckError(`${at}[${j}]: key and value must be ${minValue === 0 ? "strings, the key non-empty" : "non-empty strings"}`);
      if (key.length > REQUEST_CAPS.keyChars)
        throw new CheckError(`${at}[${j}].key: at most ${REQUEST_CAPS.keyChars} characters (got ${key.length})`);
      if (value.length > maxValue) throw new CheckError(`${at}[${j}].value: at most ${maxValue} characters (got ${value.length})`);
      checkText(key, `${at}[${j}].key`);
      checkText(value, `${at}[${j}].value`);
    }
  }
}

/**
 * Checks a limit sent with a descriptor (Envoy's `RateLimitDescriptor.limit`) as the library
 * would when building its fixed window, so a limit it cannot honour is the caller's error
 * (INVALID_ARGUMENT), not a store failure.
 * @param field the limit's path, e.g. `descriptors[0].limit`
 * @throws CheckError naming `<field>.requests_per_unit`
 */
export function checkCallerLimit(field: string, requestsPerUnit: number, unitMs: number): void {
  const issues: ConfigIssue[] = [];
  collectIssues(issues, () => resolveLimit({ algorithm: "fixed-window", limit: requestsPerUnit, window: unitMs }));
  if (issues.length > 0) {
    const why = issues.map((i) => i.message).join("; ");
    throw new CheckError(`${field}.requests_per_unit: ${requestsPerUnit} per ${unitMs} ms cannot be a limit (${why})`);
  }
}
