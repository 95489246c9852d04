import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { Logger } from "../log.js";
import type { DecisionService } from "../service/decide.js";
import { checkCallerLimit, checkShape, GRPC_SHAPE, REQUEST_CAPS } from "../service/request-caps.js";
import { CheckError, type CheckInput, type CheckResult, type DescriptorStatus } from "../service/types.js";
import { limitHeaders } from "./render.js";

/** The directory holding Envoy's (trimmed) protos: packages/server/proto. */
export const PROTO_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "proto");
/** The RLS proto, relative to {@link PROTO_DIR}. */
export const RLS_PROTO = "envoy/service/ratelimit/v3/rls.proto";

/**
 * Loads Envoy's RLS service definition. Snake-case field names as on the wire (`keepCase`), so
 * the objects below read like the proto.
 * @example const def = loadRlsDefinition(); // def.envoy.service.ratelimit.v3.RateLimitService
 */
export function loadRlsDefinition(): grpc.GrpcObject {
  const pkg = protoLoader.loadSync(RLS_PROTO, {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: false,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(pkg);
}

interface Entry {
  key?: string;
  value?: string;
}
interface RateLimitRequest {
  domain?: string;
  descriptors?: Array<{ entries?: Entry[]; limit?: { requests_per_unit?: number; unit?: string } | null }>;
  hits_addend?: number;
}
type Unit = "SECOND" | "MINUTE" | "HOUR" | "DAY";
interface RlsStatus {
  code: "OK" | "OVER_LIMIT";
  current_limit?: { name: string; requests_per_unit: number; unit: Unit };
  limit_remaining: number;
  duration_until_reset?: { seconds: number; nanos: number };
}
interface RateLimitResponse {
  overall_code: "OK" | "OVER_LIMIT";
  statuses: RlsStatus[];
  response_headers_to_add: Array<{ key: string; value: string }>;
}

const UNITS: ReadonlyArray<readonly [Unit, number]> = [
  ["DAY", 86_400_000],
  ["HOUR", 3_600_000],
  ["MINUTE", 60_000],
  ["SECOND", 1_000],
];

/**
 * Envoy's `RateLimit` is `requests_per_unit` per calendar unit. A window that is exactly a unit
 * maps exactly; another window (e.g. 100 per 10 s) is reported per the largest unit dividing it,
 * scaled and rounded down (10 per SECOND), and `name` carries the exact policy (`100-per-10s`).
 */
function currentLimit(s: DescriptorStatus): RlsStatus["current_limit"] {
  if (s.limit === null || s.windowMs === null) return undefined;
  const name = s.policy ?? "";
  for (const [unit, ms] of UNITS) {
    if (s.windowMs % ms === 0) return { name, requests_per_unit: Math.max(1, Math.floor((s.limit * ms) / s.windowMs)), unit };
  }
  return { name, requests_per_unit: Math.max(1, Math.floor((s.limit * 1000) / s.windowMs)), unit: "SECOND" };
}

const UINT32_MAX = 4_294_967_295;
const UNIT_MS: Readonly<Record<string, number>> = { SECOND: 1_000, MINUTE: 60_000, HOUR: 3_600_000, DAY: 86_400_000 };

function toRls(s: DescriptorStatus): RlsStatus {
  const out: RlsStatus = { code: s.allowed ? "OK" : "OVER_LIMIT", limit_remaining: Math.min(UINT32_MAX, s.remaining ?? 0) };
  const cl = currentLimit(s);
  if (cl) {
    out.current_limit = cl;
    const ms = s.allowed ? s.resetAfterMs : Math.max(s.retryAfterMs, 0);
    out.duration_until_reset = { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 };
  }
  return out;
}

/** Options of {@link createGrpcServer}. */
export interface GrpcOptions {
  service: DecisionService;
  logger: Logger;
}

/**
 * Envoy's rate limit service, `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`,
 * wire-compatible (so Envoy, Istio, Contour or Emissary can use it):
 * - `hits_addend` is the request's cost (0 or unset: 1), multiplied by the rule's `cost`;
 * - one status per descriptor, in order: `code`, `current_limit` (unset when unlimited or no rule
 *   matched, as envoyproxy/ratelimit does), `limit_remaining`, `duration_until_reset` (time to the
 *   full allowance when allowed; to the retry when denied);
 * - `overall_code` OVER_LIMIT when any descriptor is; shadow rules never deny;
 * - `response_headers_to_add`: the same RateLimit-* / Retry-After headers as the HTTP API.
 * A request that cannot be decided, or larger than the caps of service/request-caps.ts, is
 * INVALID_ARGUMENT naming the field; a failing store UNAVAILABLE (Envoy then
 * applies its `failure_mode_deny`).
 * A descriptor's own `limit` (from Envoy's route config) replaces the rules for it, as in
 * envoyproxy/ratelimit: `requests_per_unit` per clock-aligned `unit`, never shadowed.
 * @example const server = createGrpcServer({ service, logger }); server.bindAsync("0.0.0.0:8081", grpc.ServerCredentials.createInsecure(), cb);
 */
export function createGrpcServer(options: GrpcOptions): grpc.Server {
  const { service, logger } = options;
  const def = loadRlsDefinition() as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  };
  const server = new grpc.Server({
    "grpc.keepalive_permit_without_calls": 1,
    // Larger messages are refused (RESOURCE_EXHAUSTED) before they are decoded into objects.
    "grpc.max_receive_message_length": REQUEST_CAPS.grpcMessageBytes,
  });
  server.addService(def.envoy.service.ratelimit.v3.RateLimitService.service, {
    ShouldRateLimit(
      call: grpc.ServerUnaryCall<RateLimitRequest, RateLimitResponse>,
      callback: grpc.sendUnaryData<RateLimitResponse>,
    ): void {
      let result: CheckResult | Promise<CheckResult>;
      try {
        // On the memory store the answer comes back in this call (no promise, no microtask turn).
        result = service.decideNow(checkOf(call.request));
      } catch (e) {
        return failed(e, callback);
      }
      if (result instanceof Promise) result.then((r) => answer(r, callback)).catch((e: unknown) => failed(e, callback));
      else answer(result, callback);
    },
  });

  function answer(r: CheckResult, callback: grpc.sendUnaryData<RateLimitResponse>): void {
    const headers = limitHeaders(r.statuses);
    callback(null, {
      overall_code: r.allowed ? "OK" : "OVER_LIMIT",
      statuses: r.statuses.map(toRls),
      response_headers_to_add: Object.entries(headers).map(([key, value]) => ({ key: key.toLowerCase(), value })),
    });
  }

  function failed(e: unknown, callback: grpc.sendUnaryData<RateLimitResponse>): void {
    if (e instanceof CheckError) return callback({ code: grpc.status.INVALID_ARGUMENT, details: e.message });
    logger.error({ err: e }, "ShouldRateLimit failed");
    callback({ code: grpc.status.UNAVAILABLE, details: `the store failed: ${(e as Error).message}` });
  }
  return server;
}

/**
 * The check a ShouldRateLimit request asks for.
 * @throws CheckError naming the field of a request that breaks the caps or has empty entries
 */
function checkOf(req: RateLimitRequest): CheckInput {
  checkShape(req.domain, req.descriptors ?? [], GRPC_SHAPE);
  const descriptors = (req.descriptors ?? []).map((d, i) =>
    (d.entries ?? []).map((e, j) => {
      if (!e.key || !e.value) throw new CheckError(`descriptors[${i}].entries[${j}]: key and value must be non-empty`);
      return { key: e.key, value: e.value };
    }),
  );
  // Envoy's per-descriptor limit (RateLimitDescriptor.limit) replaces the rules for that descriptor.
  const descriptorLimits = (req.descriptors ?? []).map((d, i) => {
    if (!d.limit) return undefined;
    const unitMs = UNIT_MS[d.limit.unit ?? ""];
    if (unitMs === undefined) throw new CheckError(`descriptors[${i}].limit.unit: must be SECOND, MINUTE, HOUR or DAY`);
    checkCallerLimit(`descriptors[${i}].limit`, d.limit.requests_per_unit ?? 0, unitMs);
    return { requestsPerUnit: d.limit.requests_per_unit ?? 0, unitMs };
  });
  return {
    domain: req.domain ?? "",
    descriptors,
    cost: req.hits_addend ? req.hits_addend : undefined,
    descriptorLimits: descriptorLimits.some((l) => l !== undefined) ? descriptorLimits : undefined,
  };
}

/** Binds a gRPC server; resolves the port (useful with port 0). */
export function bindGrpc(server: grpc.Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound)));
  });
}
