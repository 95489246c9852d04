/**
 * Envoy's rate limit service API (RLS v3, `envoy.service.ratelimit.v3`) with the semantics of
 * envoyproxy/ratelimit, the service Envoy users run today: a request read into a
 * {@link CheckInput}, and a {@link CheckResult} written as a `RateLimitResponse`. The gRPC
 * transport and `POST /json` both use it, so they cannot drift apart.
 *
 * Objects are as `@grpc/proto-loader` decodes the official protos (packages/server/proto) with
 * `keepCase`, enums as strings and 64-bit integers as numbers.
 */
import { MAX_COST } from "../service/costs.js";
import { checkCallerLimit, checkShape, GRPC_SHAPE } from "../service/request-caps.js";
import { rlsName } from "../service/status.js";
import { CheckError, type CallerLimit, type CheckInput, type CheckResult, type DescriptorStatus } from "../service/types.js";
import { DEFAULT_STYLES, limitHeaderList } from "./render.js";

/** `RateLimitDescriptor.Entry`: the proto allows an empty value. */
export interface RlsEntry {
  key?: string;
  value?: string;
}

/** `RateLimitDescriptor`: entries, an optional limit override, an optional own `hits_addend` (a UInt64Value). */
export interface RlsDescriptor {
  entries?: RlsEntry[];
  limit?: { requests_per_unit?: number; unit?: string } | null;
  hits_addend?: { value?: number | string } | null;
}

/** `RateLimitRequest`. */
export interface RlsRequest {
  domain?: string;
  descriptors?: RlsDescriptor[];
  hits_addend?: number;
}

/** `RateLimitResponse.RateLimit.Unit` (WEEK is 7 in the enum, after YEAR). */
export type RlsUnit = "SECOND" | "MINUTE" | "HOUR" | "DAY" | "WEEK" | "MONTH" | "YEAR";

/** `RateLimitResponse.DescriptorStatus`. */
export interface RlsStatus {
  code: "OK" | "OVER_LIMIT";
  current_limit?: { name: string; requests_per_unit: number; unit: RlsUnit };
  limit_remaining: number;
  duration_until_reset?: { seconds: number; nanos: number };
}

/** `RateLimitResponse` (the fields this service answers; `raw_body`, `quota` and `dynamic_metadata` stay unset, as in envoyproxy/ratelimit by default). */
export interface RlsResponse {
  overall_code: "OK" | "OVER_LIMIT";
  statuses: RlsStatus[];
  response_headers_to_add: Array<{ key: string; value: string }>;
}

/**
 * The length of each unit, as envoyproxy/ratelimit counts them (src/utils/utilities.go,
 * `UnitToDivider`): a MONTH is 30 days, a YEAR 365 days, each counted in clock-aligned windows.
 * Longest first: a window reports the longest unit it equals (or, failing that, divides by).
 */
export const RLS_UNIT_MS: ReadonlyArray<readonly [RlsUnit, number]> = [
  ["YEAR", 365 * 86_400_000],
  ["MONTH", 30 * 86_400_000],
  ["WEEK", 7 * 86_400_000],
  ["DAY", 86_400_000],
  ["HOUR", 3_600_000],
  ["MINUTE", 60_000],
  ["SECOND", 1_000],
];
const UNIT_MS = new Map<string, number>(RLS_UNIT_MS);

/** envoyproxy/ratelimit's `MaxUint32`: the `limit_remaining` of an unlimited descriptor. */
export const UINT32_MAX = 4_294_967_295;

/**
 * A request envoyproxy/ratelimit refuses as a service error (empty domain or descriptor list),
 * with its own message; gRPC UNKNOWN, as a Go error returned by a gRPC handler is.
 */
export class RlsServiceError extends CheckError {}

/**
 * What the RLS transports report, as envoyproxy/ratelimit counts it: a call refused
 * (`service_error`: a request it cannot decide, or an internal error; `redis_error`: the store failed), and an answer
 * turned OK by the global shadow mode.
 */
export interface RlsMetrics {
  rlsError(kind: "service_error" | "redis_error"): void;
  rlsGlobalShadow(): void;
}

/** How an RLS answer adds response headers. */
export type RlsHeaders =
  /** ratekeeper's limit headers (the middleware's `RateLimit-*` and `Retry-After`). */
  | { readonly kind: "ratekeeper" }
  /** None (envoyproxy/ratelimit's default, `LIMIT_RESPONSE_HEADERS_ENABLED=false`). */
  | { readonly kind: "none" }
  /** envoyproxy/ratelimit's `LIMIT_RESPONSE_HEADERS_ENABLED`: limit, remaining and reset of the closest descriptor, under these names. */
  | { readonly kind: "envoy"; readonly limit: string; readonly remaining: string; readonly reset: string };

/**
 * Reads an RLS request into a check.
 * - `hits_addend` 0 (unset) is a cost of 1; a descriptor's own `hits_addend` replaces it, and 0
 *   there means check only (nothing charged);
 * - a cost larger than a policy could ever admit is OVER_LIMIT, not an error;
 * - entries may have empty values; a descriptor's `limit` may be in any unit and may be 0.
 * @throws RlsServiceError for an empty domain or descriptor list; CheckError for anything else it cannot read
 */
export function rlsCheckInput(req: RlsRequest): CheckInput {
  if (!req.domain) throw new RlsServiceError("rate limit domain must not be empty");
  const list = req.descriptors ?? [];
  if (list.length === 0) throw new RlsServiceError("rate limit descriptor list must not be empty");
  checkShape(req.domain, list, GRPC_SHAPE);
  let limits: Array<CallerLimit | undefined> | undefined;
  let costs: Array<number | undefined> | undefined;
  const descriptors = list.map((d, i) => {
    if (d.limit) (limits ??= [])[i] = callerLimit(d.limit, i);
    if (d.hits_addend) (costs ??= [])[i] = ownCost(d.hits_addend.value, i);
    return (d.entries ?? []).map((e) => ({ key: e.key as string, value: e.value ?? "" }));
  });
  return {
    domain: req.domain,
    descriptors,
    // Above MAX_COST no policy of this service could admit the cost anyway: it is denied alike.
    cost: req.hits_addend ? Math.min(req.hits_addend, MAX_COST) : undefined,
    descriptorLimits: limits,
    descriptorCosts: costs,
    oversizeCost: "deny",
  };
}

function callerLimit(limit: NonNullable<RlsDescriptor["limit"]>, i: number): CallerLimit {
  const unitMs = UNIT_MS.get(limit.unit ?? "");
  if (unitMs === undefined)
    throw new CheckError(
      `descriptors[${i}].limit.unit: must be one of ${RLS_UNIT_MS.map(([u]) => u).join(", ")} (got ${limit.unit ?? "UNKNOWN"})`,
    );
  const rpu = limit.requests_per_unit ?? 0;
  if (rpu !== 0) checkCallerLimit(`descriptors[${i}].limit`, rpu, unitMs);
  return { requestsPerUnit: rpu, unitMs };
}

/**
 * A descriptor's own `hits_addend`, a uint64 (proto-loader gives it as a number, inexact above
 * 2^53). Any value above MAX_COST is denied as MAX_COST would be: an error here would make Envoy
 * apply `failure_mode_deny`, which lets the request through by default, where envoyproxy/ratelimit
 * answers OVER_LIMIT.
 */
function ownCost(value: number | string | undefined, i: number): number {
  const n = Number(value ?? 0);
  if (!Number.isInteger(n) || n < 0) throw new CheckError(`descriptors[${i}].hits_addend: must be a whole number (got ${String(value)})`);
  return Math.min(n, MAX_COST);
}

/**
 * Envoy's `RateLimit` is `requests_per_unit` per calendar unit. A window that is exactly a unit
 * maps exactly; another window (e.g. 100 per 10 s) is reported per the largest unit dividing it,
 * scaled and rounded down (10 per SECOND), and `name` carries the exact policy (`100-per-10s`).
 */
function currentLimit(s: DescriptorStatus): RlsStatus["current_limit"] {
  if (s.limit === null || s.windowMs === null) return undefined;
  const name = rlsName(s);
  // requests_per_unit is a uint32: a larger limit (ratekeeper's own policies allow one) is
  // reported as the largest it can carry, not wrapped around by the encoder.
  const per = (n: number) => Math.min(UINT32_MAX, n);
  for (const [unit, ms] of RLS_UNIT_MS) if (s.windowMs === ms) return { name, requests_per_unit: per(s.limit), unit };
  for (const [unit, ms] of RLS_UNIT_MS) {
    if (s.windowMs % ms === 0) return { name, requests_per_unit: per(Math.max(1, Math.floor((s.limit * ms) / s.windowMs))), unit };
  }
  return { name, requests_per_unit: per(Math.max(1, Math.floor((s.limit * 1000) / s.windowMs))), unit: "SECOND" };
}

/**
 * One descriptor's status as envoyproxy/ratelimit gives it: no rule matched is OK with no
 * `current_limit` and 0 remaining; an unlimited rule is OK with {@link UINT32_MAX} remaining;
 * a limited one has `current_limit`, `limit_remaining` and `duration_until_reset` (time to the
 * full allowance when allowed; to the retry when denied). Shadow rules never deny.
 */
export function rlsStatus(s: DescriptorStatus): RlsStatus {
  if (s.explain.source === "none") return { code: "OK", limit_remaining: 0 };
  if (s.unlimited) return { code: "OK", limit_remaining: UINT32_MAX };
  const out: RlsStatus = { code: s.allowed ? "OK" : "OVER_LIMIT", limit_remaining: Math.min(UINT32_MAX, s.remaining ?? 0) };
  const cl = currentLimit(s);
  if (cl) {
    out.current_limit = cl;
    const ms = s.allowed && !s.overLimit ? s.resetAfterMs : Math.max(s.retryAfterMs, 0);
    // Whole seconds, rounded up, as envoyproxy/ratelimit's CalculateReset (the unit's length less
    // the Unix seconds into it): Envoy's X-RateLimit-Reset reads only `seconds`, so 0.9 s would
    // tell a client still denied that the window had reset.
    out.duration_until_reset = { seconds: Math.ceil(ms / 1000), nanos: 0 };
  }
  return out;
}

/**
 * A check's result as a `RateLimitResponse`: OVER_LIMIT when any descriptor is, unless
 * `globalShadow` (envoyproxy/ratelimit's `SHADOW_MODE`: the overall code is OK, the descriptors'
 * statuses still say which are over).
 */
export function rlsResponse(r: CheckResult, headers: RlsHeaders, globalShadow = false): RlsResponse {
  const statuses = r.statuses.map(rlsStatus);
  return {
    overall_code: r.allowed || globalShadow ? "OK" : "OVER_LIMIT",
    statuses,
    response_headers_to_add:
      headers.kind === "envoy" ? envoyHeaders(statuses, headers) : headers.kind === "none" ? [] : ratekeeperHeaders(r),
  };
}

function ratekeeperHeaders(r: CheckResult): RlsResponse["response_headers_to_add"] {
  // The flat list limitHeaders is built from: no object and no Object.entries per call.
  const flat = limitHeaderList(r.statuses, DEFAULT_STYLES, []);
  const out: RlsResponse["response_headers_to_add"] = [];
  for (let i = 0; i < flat.length; i += 2) out.push({ key: (flat[i] as string).toLowerCase(), value: flat[i + 1] as string });
  return out;
}

/**
 * envoyproxy/ratelimit's headers (src/service/ratelimit.go): the descriptor closest to its limit
 * (an over-limit one wins), its `requests_per_unit`, `limit_remaining` and the seconds to the
 * end of its unit.
 */
function envoyHeaders(
  statuses: readonly RlsStatus[],
  names: Extract<RlsHeaders, { kind: "envoy" }>,
): RlsResponse["response_headers_to_add"] {
  let closest: RlsStatus | undefined;
  for (const s of statuses) {
    if (s.current_limit === undefined) continue;
    if (s.code === "OVER_LIMIT") closest = s;
    else if (closest?.code !== "OVER_LIMIT" && (closest === undefined || s.limit_remaining < closest.limit_remaining)) closest = s;
  }
  if (closest?.current_limit === undefined) return [];
  const resetSeconds = closest.duration_until_reset?.seconds ?? 0;
  return [
    { key: names.limit, value: String(closest.current_limit.requests_per_unit) },
    { key: names.remaining, value: String(closest.limit_remaining) },
    { key: names.reset, value: String(resetSeconds) },
  ];
}
