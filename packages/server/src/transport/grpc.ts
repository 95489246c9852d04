import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { MAX_TIMER_MS } from "ratekeeper";
import type { Logger } from "../log.js";
import type { DecisionService } from "../service/decide.js";
import { REQUEST_CAPS } from "../service/request-caps.js";
import { errorIdField, internalMessage } from "../http-io.js";
import { CheckError, StoreFailure, type CheckResult } from "../service/types.js";
import { healthHandlers } from "./grpc-health.js";
import { rlsCheckInput, rlsResponse, RlsServiceError, type RlsHeaders, type RlsMetrics, type RlsRequest, type RlsResponse } from "./rls.js";

/** The directory holding the official protos (Envoy's data-plane-api and its imports, gRPC health): packages/server/proto, see its SOURCES.md. */
export const PROTO_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "proto");
/** The RLS proto, relative to {@link PROTO_DIR}. */
export const RLS_PROTO = "envoy/service/ratelimit/v3/rls.proto";
/** gRPC's health checking proto, relative to {@link PROTO_DIR}. */
export const HEALTH_PROTO = "grpc/health/v1/health.proto";

/**
 * Loads Envoy's RLS service and gRPC's health service from the official protos. Snake-case field
 * names as on the wire (`keepCase`), so the objects below read like the proto.
 * @example const def = loadRlsDefinition(); // def.envoy.service.ratelimit.v3.RateLimitService
 */
export function loadRlsDefinition(): grpc.GrpcObject {
  const pkg = protoLoader.loadSync([RLS_PROTO, HEALTH_PROTO], {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: false,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(pkg);
}

/** Options of {@link createGrpcServer}. */
export interface GrpcOptions {
  service: DecisionService;
  logger: Logger;
  /** Whether the service can answer (gRPC health: SERVING or NOT_SERVING). @default always */
  healthy?: (() => boolean) | undefined;
  /** The response headers ShouldRateLimit adds. @default { kind: "ratekeeper" } */
  headers?: RlsHeaders | undefined;
  /** envoyproxy/ratelimit's global shadow mode: the overall code is always OK. @default false */
  globalShadow?: boolean | undefined;
  /** Counts refused calls and shadowed answers (envoyproxy/ratelimit's service counters). */
  metrics?: RlsMetrics | undefined;
  /** Close (GOAWAY) a connection this old, so clients spread over instances again (its GRPC_MAX_CONNECTION_AGE). @default never */
  maxConnectionAgeMs?: number | undefined;
  /** How long calls in flight then have before the connection is closed (its GRPC_MAX_CONNECTION_AGE_GRACE). @default unlimited */
  maxConnectionAgeGraceMs?: number | undefined;
}

/**
 * The connection age handed to grpc-js: it sets each connection's timer at the age plus a jitter
 * of up to +-10%, and node fires a timer past 2^31 - 1 ms after 1 ms, so an age from about 22.6
 * days up closed connections at once (GOAWAY; a call meeting it: UNAVAILABLE). Such an age is
 * lowered to the largest that fits with the jitter (at most 10% shorter); 2^31 - 1 (MAX_TIMER_MS)
 * stays never, as grpc-js reads it.
 */
export function connectionAge(ms: number): number {
  return ms === MAX_TIMER_MS ? ms : Math.min(ms, Math.floor(MAX_TIMER_MS / 1.1));
}

/**
 * Envoy's rate limit service, `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`,
 * with envoyproxy/ratelimit's semantics (transport/rls.ts), so Envoy, Istio, Contour or Emissary
 * can use it unchanged; and `grpc.health.v1.Health` on the same port.
 * A request that cannot be decided, or larger than the caps of service/request-caps.ts, is
 * INVALID_ARGUMENT naming the field (an empty domain or descriptor list: UNKNOWN with
 * envoyproxy/ratelimit's message); a failing store UNAVAILABLE (Envoy then applies its
 * `failure_mode_deny`); an unexpected error (a bug) INTERNAL.
 * @example const server = createGrpcServer({ service, logger }); server.bindAsync("0.0.0.0:8081", grpc.ServerCredentials.createInsecure(), cb);
 */
export function createGrpcServer(options: GrpcOptions): grpc.Server {
  const { service, logger } = options;
  const headers = options.headers ?? { kind: "ratekeeper" };
  const shadow = options.globalShadow === true;
  const metrics = options.metrics;
  const def = loadRlsDefinition() as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  };
  const server = new grpc.Server({
    "grpc.keepalive_permit_without_calls": 1,
    // Larger messages are refused (RESOURCE_EXHAUSTED) before they are decoded into objects.
    "grpc.max_receive_message_length": REQUEST_CAPS.grpcMessageBytes,
    ...(options.maxConnectionAgeMs !== undefined ? { "grpc.max_connection_age_ms": connectionAge(options.maxConnectionAgeMs) } : {}),
    ...(options.maxConnectionAgeGraceMs !== undefined ? { "grpc.max_connection_age_grace_ms": options.maxConnectionAgeGraceMs } : {}),
  });
  server.addService(def.envoy.service.ratelimit.v3.RateLimitService.service, {
    ShouldRateLimit(call: grpc.ServerUnaryCall<RlsRequest, RlsResponse>, callback: grpc.sendUnaryData<RlsResponse>): void {
      let result: CheckResult | Promise<CheckResult>;
      try {
        // On the memory store the answer comes back in this call (no promise, no microtask turn).
        result = service.decideNow(rlsCheckInput(call.request));
      } catch (e) {
        return failed(e, callback);
      }
      if (result instanceof Promise) result.then((r) => answer(r, callback)).catch((e: unknown) => failed(e, callback));
      else answer(result, callback);
    },
  });

  function answer(r: CheckResult, callback: grpc.sendUnaryData<RlsResponse>): void {
    if (shadow && !r.allowed) metrics?.rlsGlobalShadow();
    callback(null, rlsResponse(r, headers, shadow));
  }

  function failed(e: unknown, callback: grpc.sendUnaryData<RlsResponse>): void {
    metrics?.rlsError(e instanceof StoreFailure ? "redis_error" : "service_error");
    if (e instanceof RlsServiceError) return callback({ code: grpc.status.UNKNOWN, details: e.message });
    if (e instanceof CheckError) return callback({ code: grpc.status.INVALID_ARGUMENT, details: e.message });
    logger.error({ err: e, ...errorIdField(e) }, "ShouldRateLimit failed");
    if (e instanceof StoreFailure) return callback({ code: grpc.status.UNAVAILABLE, details: e.message });
    callback({ code: grpc.status.INTERNAL, details: internalMessage(e) });
  }
  server.addService(def.grpc.health.v1.Health.service, healthHandlers(options.healthy ?? (() => true)));
  return server;
}

/** Binds a gRPC server; resolves the port (useful with port 0). */
export function bindGrpc(server: grpc.Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound)));
  });
}
