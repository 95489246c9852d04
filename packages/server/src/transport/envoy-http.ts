/**
 * envoyproxy/ratelimit's two HTTP endpoints, on the service's HTTP port, answered as its Go
 * server answers them, so health checks and Lua clients written for it keep working:
 * - `/json` (src/server/server_impl.go, `NewJsonHandler`): the RLS request in protobuf's JSON
 *   mapping (transport/rls-json.ts), decided as over gRPC; 200, or 429 when over the limit. A
 *   body it cannot read, a request the service refuses, and a store failure are all
 *   `400 Bad Request` as plain text, as Go's `http.Error` writes it (the reason goes to the
 *   debug log, as Go logs it). Any method, as there. Unlike there, the body is capped
 *   (`--max-body`): larger is `413 Request Entity Too Large` and the connection is closed.
 * - `/healthcheck` (src/server/health.go): `200 OK` while the service is ready (the readiness of
 *   `/readyz`: not shutting down, the Redis store reachable), else 500 with an empty body.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { errorIdField, HttpError, readJson } from "../http-io.js";
import type { Logger } from "../log.js";
import type { DecisionService } from "../service/decide.js";
import { CheckError, StoreFailure, type CheckResult } from "../service/types.js";
import { rlsCheckInput, rlsResponse, type RlsHeaders, type RlsMetrics } from "./rls.js";
import { rlsRequestFromJson, rlsResponseJson } from "./rls-json.js";

/** What the two endpoints need. */
export interface EnvoyHttpOptions {
  readonly service: DecisionService;
  readonly logger: Logger;
  /** The response headers the answer adds, as over gRPC. */
  readonly headers: RlsHeaders;
  /** envoyproxy/ratelimit's global shadow mode: the overall code is always OK (200). */
  readonly globalShadow: boolean;
  /** Counts refused calls and shadowed answers, as over gRPC. */
  readonly metrics?: RlsMetrics | undefined;
  /** Largest body, in bytes. */
  readonly maxBodyBytes: number;
  readonly readiness: () => { ready: boolean };
}

/** Answers `/json`: the RLS request in JSON, decided as over gRPC. Never rejects. */
export async function envoyJson(req: IncomingMessage, res: ServerResponse, o: EnvoyHttpOptions): Promise<void> {
  let result: CheckResult;
  try {
    const body = await readJson(req, o.maxBodyBytes);
    result = await o.service.decideNow(rlsCheckInput(rlsRequestFromJson(body)));
  } catch (e) {
    if (!req.readableEnded) req.resume();
    if (e instanceof HttpError && e.code === "payload_too_large")
      return goError(res, 413, "Request Entity Too Large", { connection: "close" });
    if (e instanceof CheckError || e instanceof HttpError) o.logger.debug({ err: (e as Error).message }, "/json: bad request");
    // errorId (not in the fixed 400 body): so that repeats of one failure are counted, not each written (log-repeats.ts).
    else if (e instanceof StoreFailure) o.logger.warn({ err: e, ...errorIdField(e) }, "/json: the store failed");
    else o.logger.error({ err: e, ...errorIdField(e) }, "/json: internal error");
    // A body it cannot read never reached its service: only refused requests and failures count.
    if (!(e instanceof HttpError)) o.metrics?.rlsError(e instanceof StoreFailure ? "redis_error" : "service_error");
    return goError(res, 400, "Bad Request");
  }
  const answer = rlsResponse(result, o.headers, o.globalShadow);
  if (o.globalShadow && !result.allowed) o.metrics?.rlsGlobalShadow();
  const text = rlsResponseJson(answer);
  res.writeHead(answer.overall_code === "OK" ? 200 : 429, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

/** Answers `/healthcheck`: `OK`, or 500 with an empty body. */
export function envoyHealthcheck(res: ServerResponse, o: Pick<EnvoyHttpOptions, "readiness">): void {
  if (o.readiness().ready) {
    res.writeHead(200, { "content-type": "text/plain; charset=utf-8", "content-length": 2 });
    res.end("OK");
  } else {
    res.writeHead(500, { "content-length": 0 });
    res.end();
  }
}

/** Go's `http.Error(w, http.StatusText(code), code)`. */
function goError(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  const body = `${text}\n`;
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "x-content-type-options": "nosniff",
    "content-length": Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}
