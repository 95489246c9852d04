/**
 * gRPC's health checking protocol (`grpc.health.v1.Health`, grpc/grpc-proto), as Kubernetes
 * gRPC probes, Envoy's gRPC health checks and `grpc_health_probe` ask it. The whole server and
 * the rate limit service share one status: SERVING while the service can decide (see
 * `readiness` in server.ts), NOT_SERVING otherwise. Services it does not serve are NOT_FOUND.
 */
import * as grpc from "@grpc/grpc-js";

type Status = "SERVING" | "NOT_SERVING" | "SERVICE_UNKNOWN";

/**
 * The names a health check may ask about: the whole server (""), the RLS service by its full
 * name, and "ratelimit" (the name envoyproxy/ratelimit registers its health under).
 */
export const HEALTH_SERVICES = ["", "envoy.service.ratelimit.v3.RateLimitService", "ratelimit"] as const;

/** How often a `Watch` stream looks for a change of status, in ms. */
const WATCH_POLL_MS = 1_000;

interface HealthCheckRequest {
  service?: string;
}
interface HealthCheckResponse {
  status: Status;
}

/**
 * The handlers of `grpc.health.v1.Health`: `Check`, `Watch` (the status now, then each change)
 * and `List`.
 * @param healthy whether the service can answer now
 */
export function healthHandlers(healthy: () => boolean): grpc.UntypedServiceImplementation {
  const known = new Set<string>(HEALTH_SERVICES);
  const status = (): Status => (healthy() ? "SERVING" : "NOT_SERVING");
  return {
    Check(call: grpc.ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, callback: grpc.sendUnaryData<HealthCheckResponse>) {
      const name = call.request.service ?? "";
      if (!known.has(name)) return callback({ code: grpc.status.NOT_FOUND, details: `unknown service ${JSON.stringify(name)}` });
      callback(null, { status: status() });
    },
    Watch(call: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) {
      const name = call.request.service ?? "";
      // The protocol: an unknown service is SERVICE_UNKNOWN on the stream, not an error.
      if (!known.has(name)) {
        call.write({ status: "SERVICE_UNKNOWN" });
        return;
      }
      let last = status();
      call.write({ status: last });
      const timer = setInterval(() => {
        const now = status();
        if (now !== last) call.write({ status: (last = now) });
      }, WATCH_POLL_MS);
      timer.unref();
      const stop = () => clearInterval(timer);
      call.on("cancelled", stop);
      call.on("close", stop);
      call.on("error", stop);
    },
    List(_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) {
      const s = status();
      callback(null, { statuses: Object.fromEntries(HEALTH_SERVICES.map((n) => [n, { status: s }])) });
    },
  };
}
