/**
 * envoyproxy/ratelimit's `/json` endpoint (src/server/server_impl.go, `NewJsonHandler`): a
 * `RateLimitRequest` in protobuf's canonical JSON mapping, as Go's `protojson.Unmarshal` reads
 * it, and the `RateLimitResponse` written as `protojson.Marshal` writes it. The decision itself is
 * the gRPC one (transport/rls.ts).
 *
 * protobuf's JSON mapping (https://protobuf.dev/programming-guides/json/), as far as these
 * messages need it: a field is named by its lowerCamelCase JSON name or its proto name; `null`
 * is the field's default; an unknown field is an error; a uint32 is a JSON number or a string
 * holding one, whole and in range; an enum is its name or its number; a `UInt64Value` wrapper is
 * its bare value. Written: fields in declaration order, zero values left out, enums by name, a
 * `Duration` as a string of seconds (`"59s"`, `"0.500s"`).
 */
import { CheckError } from "../service/types.js";
import type { RlsDescriptor, RlsEntry, RlsRequest, RlsResponse, RlsStatus } from "./rls.js";

/** `envoy.type.v3.RateLimitUnit`, the unit of a descriptor's own limit, by number. */
const OVERRIDE_UNITS = ["UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR"] as const;

/** One message's fields: JSON name -> proto name, and the reverse, both accepted. */
function fieldsOf(names: readonly string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (const proto of names) {
    m.set(proto, proto);
    m.set(
      proto.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()),
      proto,
    );
  }
  return m;
}

const REQUEST = fieldsOf(["domain", "descriptors", "hits_addend"]);
const DESCRIPTOR = fieldsOf(["entries", "limit", "hits_addend"]);
const ENTRY = fieldsOf(["key", "value"]);
const OVERRIDE = fieldsOf(["requests_per_unit", "unit"]);

/**
 * Reads a parsed `/json` body as Go's `protojson.Unmarshal` would, into the request the gRPC
 * transport gets from `@grpc/proto-loader`.
 * @throws CheckError naming the field, where protojson would fail
 * @example rlsRequestFromJson({ domain: "d", descriptors: [{ entries: [{ key: "perday" }] }] })
 */
export function rlsRequestFromJson(body: unknown): RlsRequest {
  const r = message(body, REQUEST, "body");
  const out: RlsRequest = {};
  if (r.domain != null) out.domain = str(r.domain, "domain");
  if (r.hits_addend != null) out.hits_addend = uint(r.hits_addend, "hitsAddend", 0xffff_ffff);
  if (r.descriptors != null) out.descriptors = list(r.descriptors, "descriptors").map(descriptor);
  return out;
}

function descriptor(d: unknown, i: number): RlsDescriptor {
  const at = `descriptors[${i}]`;
  const m = message(d, DESCRIPTOR, at);
  const out: RlsDescriptor = {};
  if (m.entries != null) out.entries = list(m.entries, `${at}.entries`).map((e, j) => entry(e, `${at}.entries[${j}]`));
  if (m.hits_addend != null) out.hits_addend = { value: uint64(m.hits_addend, `${at}.hitsAddend`) };
  if (m.limit != null) {
    const l = message(m.limit, OVERRIDE, `${at}.limit`);
    out.limit = {
      requests_per_unit: l.requests_per_unit != null ? uint(l.requests_per_unit, `${at}.limit.requestsPerUnit`, 0xffff_ffff) : 0,
      unit: l.unit != null ? unit(l.unit, `${at}.limit.unit`) : "UNKNOWN",
    };
  }
  return out;
}

function entry(e: unknown, at: string): RlsEntry {
  const m = message(e, ENTRY, at);
  return { key: m.key != null ? str(m.key, `${at}.key`) : "", value: m.value != null ? str(m.value, `${at}.value`) : "" };
}

/** A JSON object's fields by proto name; an unknown or repeated field is an error. */
function message(v: unknown, fields: Map<string, string>, at: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new CheckError(`${at}: must be an object`);
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [k, x] of Object.entries(v)) {
    const proto = fields.get(k);
    if (proto === undefined) throw new CheckError(`${at}: unknown field ${JSON.stringify(k.slice(0, 64))}`);
    if (proto in out) throw new CheckError(`${at}: field ${proto} given twice`);
    out[proto] = x;
  }
  return out;
}

function str(v: unknown, at: string): string {
  if (typeof v !== "string") throw new CheckError(`${at}: must be a string`);
  return v;
}

function list(v: unknown, at: string): unknown[] {
  if (!Array.isArray(v)) throw new CheckError(`${at}: must be a list`);
  return v;
}

/** A whole number from 0 to `max`, as a JSON number or a string holding one. */
function uint(v: unknown, at: string, max: number): number {
  const n = typeof v === "number" ? v : typeof v === "string" && /^\d+$/.test(v) ? Number(v) : Number.NaN;
  if (!Number.isInteger(n) || n < 0 || n > max) throw new CheckError(`${at}: must be a whole number from 0 to ${max}`);
  return n;
}

/**
 * A `UInt64Value` (0 to 2^64-1, a JSON number or a string holding one), as a number: exact up to
 * 2^53, and above that only ever compared with a cost cap, so rounding cannot change a decision.
 */
function uint64(v: unknown, at: string): number {
  const max = 18_446_744_073_709_551_615n;
  // A JSON number was already read as a double: 18446744073709551615 is 2^64 by then.
  if (typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 2 ** 64) return v;
  if (typeof v === "string" && /^\d{1,20}$/.test(v) && BigInt(v) <= max) return Number(v);
  throw new CheckError(`${at}: must be a whole number from 0 to ${max}`);
}

/** A `RateLimitUnit` by name, or by number. */
function unit(v: unknown, at: string): string {
  if (typeof v === "string" && (OVERRIDE_UNITS as readonly string[]).includes(v)) return v;
  if (typeof v === "number" && Number.isInteger(v)) return OVERRIDE_UNITS[v] ?? `UNKNOWN(${v})`;
  throw new CheckError(`${at}: must be one of ${OVERRIDE_UNITS.join(", ")}`);
}

/**
 * A response as `protojson.Marshal` writes it: declaration order, zero values (0, "", an empty
 * list, an unset message) left out.
 * @example rlsResponseJson({ overall_code: "OK", statuses: [{ code: "OK", limit_remaining: 0 }], response_headers_to_add: [] }) // '{"overallCode":"OK","statuses":[{"code":"OK"}]}'
 */
export function rlsResponseJson(r: RlsResponse): string {
  const out: Record<string, unknown> = { overallCode: r.overall_code };
  if (r.statuses.length > 0) out.statuses = r.statuses.map(statusJson);
  if (r.response_headers_to_add.length > 0)
    out.responseHeadersToAdd = r.response_headers_to_add.map((h) => (h.value === "" ? { key: h.key } : { key: h.key, value: h.value }));
  return JSON.stringify(out);
}

function statusJson(s: RlsStatus): Record<string, unknown> {
  const out: Record<string, unknown> = { code: s.code };
  const cl = s.current_limit;
  if (cl) {
    // Declared in the proto as name (3), requests_per_unit (1), unit (2).
    const limit: Record<string, unknown> = {};
    if (cl.name !== "") limit.name = cl.name;
    if (cl.requests_per_unit !== 0) limit.requestsPerUnit = cl.requests_per_unit;
    limit.unit = cl.unit;
    out.currentLimit = limit;
  }
  if (s.limit_remaining !== 0) out.limitRemaining = s.limit_remaining;
  if (s.duration_until_reset) out.durationUntilReset = durationJson(s.duration_until_reset);
  return out;
}

/** `google.protobuf.Duration` in JSON: seconds with 0, 3, 6 or 9 fractional digits and an `s`. */
function durationJson(d: { seconds: number; nanos: number }): string {
  if (d.nanos === 0) return `${d.seconds}s`;
  const frac = String(d.nanos).padStart(9, "0");
  const digits = frac.endsWith("000000") ? 3 : frac.endsWith("000") ? 6 : 9;
  return `${d.seconds}.${frac.slice(0, digits)}s`;
}
