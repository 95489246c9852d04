import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Dashboard } from "../dashboard/routes.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { HeaderStyle } from "ratekeeper/http";
import type { DecisionService } from "../service/decide.js";
import type { Charge } from "../service/charges.js";
import { LeaseService } from "../service/leases.js";
import { CheckError, type CheckInput, type CheckResult } from "../service/types.js";
import { createAdminHandler } from "./admin.js";
import { authHeaders, authInput, batchOf, Query, toInput } from "./check-input.js";
import {
  errorBody,
  errorIdField,
  HttpError,
  methodNotAllowed,
  parseJsonText,
  readTextThen,
  sendError,
  sendJsonText,
  TokenCheck,
} from "../http-io.js";
import { checkBodyInput } from "./check-body.js";
import { routeOf, type HttpCall, type HttpContext } from "./http-routes.js";
import { DEFAULT_STYLES, limitHeaderList, resultBody, resultJson } from "./render.js";
import type { RlsHeaders } from "./rls.js";

/** Options of {@link createHttpServer}. */
export interface HttpOptions {
  service: DecisionService;
  metrics: Metrics;
  logger: Logger;
  /** Whether the service may take traffic: rules loaded and the store reachable (or a failure policy set). */
  readiness: () => { ready: boolean; reason?: string | undefined };
  /** Largest request body, in bytes; larger ones get 413. @default 65536 */
  maxBodyBytes?: number | undefined;
  /** Whole-request timeout for slow clients (`server.requestTimeout`). @default 10000 */
  requestTimeoutMs?: number | undefined;
  /** Time allowed to send the headers (`server.headersTimeout`). @default 5000 */
  headersTimeoutMs?: number | undefined;
  /** Limit header styles, as the middleware's `headers` option. @default ["ietf"] */
  headerStyles?: readonly HeaderStyle[] | undefined;
  /** Admin API token; without it `/v1/admin/*` is 404. */
  adminToken?: string | undefined;
  /** Passed to the admin handler as `ctx.overrides`. */
  overridesStore?: unknown;
  /** The response headers `/json` answers add, as over gRPC. @default { kind: "ratekeeper" } */
  rlsHeaders?: RlsHeaders | undefined;
  /** `/json` answers in envoyproxy/ratelimit's global shadow mode (overall OK). @default false */
  globalShadow?: boolean | undefined;
  /** Answers `/dashboard` and everything under it (it checks the admin token itself); without it they are 404. */
  dashboard?: Dashboard | undefined;
}

/** Checks in one `POST /v1/check` batch, at most. */
const MAX_BATCH = 1000;

/**
 * The HTTP API on node:http (no framework: a check is a few microseconds of work, so framework
 * overhead would dominate). Routes:
 * - `POST /v1/check`: one check (`{domain, descriptors, cost}` or `{key, policy, cost}`), or a
 *   batch (`{checks: [...]}` or a JSON array). 200 with the decision and limit headers.
 * - `GET /v1/keys/<domain>/<descriptor key>` (or `...?policy=<name>` for a plain key): peek.
 * - `GET /v1/auth`: for nginx `auth_request`; 204 or 429 (or `deny_status`) with headers.
 * - `POST /v1/leases/acquire|renew|release`: concurrency leases of the rules' `concurrency:` pools
 *   (`{pool, key}`, then `{pool, key, id}`); a refused acquire is 429 with `Retry-After`.
 * - `GET /v1/rules`: the rules in force. `/healthz`, `/readyz`, `/metrics`. `/v1/admin/*`: see {@link AdminContext}.
 * - envoyproxy/ratelimit's `/json` and `/healthcheck`, answered as it answers them (transport/envoy-http.ts).
 * - `/dashboard`: the live dashboard and its JSON (`/dashboard/api/state`, `/dashboard/api/events`).
 * Errors: `{"error": code, "message": ...}` with the status of its code (transport/http-io.ts).
 * @example const server = await createHttpServer({ service, metrics, logger, readiness: () => ({ ready: true }) });
 */
export function createHttpServer(options: HttpOptions): Promise<Server> {
  const api = new HttpApi(options);
  const requestTimeout = options.requestTimeoutMs ?? 10_000;
  const server = createServer(
    {
      requestTimeout,
      headersTimeout: options.headersTimeoutMs ?? Math.min(5_000, requestTimeout),
      keepAliveTimeout: 5_000,
      // How often node looks for requests past their timeouts (default 30 s: too lax for slow-client floods).
      connectionsCheckingInterval: Math.min(1_000, requestTimeout),
    },
    api.serve,
  );
  server.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    // Bad HTTP, or a slow client past headersTimeout/requestTimeout: answer and close.
    if (!socket.writable) return void socket.destroy(err);
    const status =
      err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? "408 Request Timeout"
        : err.code === "HPE_HEADER_OVERFLOW"
          ? "431 Request Header Fields Too Large"
          : "400 Bad Request";
    socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  });
  return Promise.resolve(server);
}

/**
 * The server's answers: the two decision routes (`/v1/check`, `/v1/auth`) here, written for
 * speed, and every other route through the table of transport/http-routes.ts.
 */
class HttpApi {
  // The decision routes' fields, read on every check straight from this object.
  private readonly service: DecisionService;
  private readonly maxBody: number;
  private readonly styles: readonly HeaderStyle[];
  /** What the other routes use. */
  private readonly ctx: HttpContext;

  constructor(private readonly options: HttpOptions) {
    const { service, logger } = options;
    this.service = service;
    this.maxBody = options.maxBodyBytes ?? 65_536;
    this.styles = options.headerStyles ?? DEFAULT_STYLES;
    const token = options.adminToken;
    this.ctx = {
      service,
      metrics: options.metrics,
      readiness: options.readiness,
      maxBody: this.maxBody,
      styles: this.styles,
      leases: new LeaseService(service.store, () => service.rules),
      admin: token
        ? {
            handler: createAdminHandler({
              overrides: options.overridesStore,
              limiters: { peek: (i) => service.peek(i), reset: (i) => service.reset(i) },
              rules: () => service.rules,
              logger,
            }),
            token: new TokenCheck(token),
          }
        : undefined,
      envoy: {
        service,
        logger,
        headers: options.rlsHeaders ?? { kind: "ratekeeper" },
        globalShadow: options.globalShadow === true,
        metrics: options.metrics,
        maxBodyBytes: this.maxBody,
        readiness: options.readiness,
      },
      dashboard: options.dashboard,
    };
  }

  /**
   * Answers one request: the server's request listener itself (an arrow bound once, so no call
   * stands between node and this one). A check on the memory store is answered in this call,
   * with no promise (see handle).
   */
  readonly serve = (req: IncomingMessage, res: ServerResponse): void => {
    let pending: void | Promise<void>;
    try {
      pending = this.handle(req, res);
    } catch (e) {
      return this.failed(req, res, e);
    }
    if (pending !== undefined) pending.catch((e: unknown) => this.failed(req, res, e));
  };

  /**
   * Reads a `POST /v1/check` body, then answers it (or the error), as {@link serve} does. The
   * common single check is read without JSON.parse (transport/check-body.ts); any other body
   * takes the general path.
   */
  private readCheck(req: IncomingMessage, res: ServerResponse): void {
    readTextThen(req, this.maxBody, (err, text) => {
      if (err !== undefined) return this.failed(req, res, err);
      let pending: void | Promise<void>;
      try {
        const input = checkBodyInput(text as string);
        pending = input !== undefined ? this.checkOne(input, res) : this.check(parseJsonText(text as string, false), res);
      } catch (e) {
        return this.failed(req, res, e);
      }
      if (pending !== undefined) pending.catch((e: unknown) => this.failed(req, res, e));
    });
  }

  private failed(req: IncomingMessage, res: ServerResponse, e: unknown): void {
    if (!(e instanceof CheckError) && !(e instanceof HttpError))
      this.options.logger.error({ err: e, url: req.url, ...errorIdField(e) }, "request failed");
    sendError(req, res, e);
  }

  /**
   * Routes a request. The decision routes (`/v1/auth`, and `/v1/check` once its body is read)
   * return nothing when the store answered synchronously: an `async` function here cost a
   * promise and a microtask turn per request. Throws (or rejects) with the error to send.
   */
  private handle(req: IncomingMessage, res: ServerResponse): void | Promise<void> {
    const url = req.url ?? "/";
    const method = req.method;
    if (url === "/v1/check" || (url.startsWith("/v1/check") && url.charCodeAt(9) === 63) /* "?" */) {
      if (method !== "POST") throw methodNotAllowed("POST");
      return this.readCheck(req, res);
    }
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    const query = new Query(q === -1 ? "" : url.slice(q + 1));
    if (path === "/v1/auth") {
      // A check charges the limit: only what nginx's auth_request sends (GET), and HEAD.
      if (method !== "GET" && method !== "HEAD") throw methodNotAllowed("GET, HEAD");
      return this.auth(req, res, query);
    }
    return this.other({ ctx: this.ctx, req, res, method, path, query });
  }

  /** Every route but the two decision routes: found in transport/http-routes.ts's table. */
  private async other(call: HttpCall): Promise<void> {
    const route = routeOf(call.path);
    if (!route) throw new HttpError("not_found", `no route ${call.method ?? ""} ${call.path}`);
    return route(call);
  }

  private check(body: unknown, res: ServerResponse): void | Promise<void> {
    const batch = batchOf(body);
    if (batch === undefined) return this.checkOne(toInput(body, ""), res);
    return this.checkBatch(batch, res);
  }

  private checkOne(input: CheckInput, res: ServerResponse): void | Promise<void> {
    const result = this.service.decideNow(input);
    if (result instanceof Promise) return result.then((r) => this.sendCheck(res, r));
    return this.sendCheck(res, result);
  }

  private sendCheck(res: ServerResponse, result: CheckResult): void {
    const body = resultBody(result);
    sendJsonText(res, 200, body.text, limitHeaderList(result.statuses, this.styles, [], this.service.limiterClock), body.bytes);
  }

  private async checkBatch(batch: unknown[], res: ServerResponse): Promise<void> {
    if (batch.length === 0 || batch.length > MAX_BATCH)
      throw new CheckError(`checks: must hold 1-${MAX_BATCH} checks (got ${batch.length})`);
    // What the batch's checks charged: given back if the batch fails, so a retry is not charged twice.
    const charges: Charge[] = [];
    const each = batch.map(async (b, i) => {
      try {
        return await this.service.decide(toInput(b, `checks[${i}].`), charges);
      } catch (e) {
        // A check that cannot be decided gets the error body in its place; a store failure fails the batch.
        if (e instanceof CheckError) return errorBody(e).body;
        throw e;
      }
    });
    // Promise.all first: a batch that succeeds, the common case, makes no settled-result objects
    // (as service/charges.ts allOrRefund for the descriptors of a check).
    const results = await Promise.all(each).catch(() => this.batchFailed(each, charges));
    let text = '{"results":[';
    for (let i = 0; i < results.length; i++) {
      const r = results[i] as CheckResult | { error: string };
      text += (i === 0 ? "" : ",") + ("error" in r ? JSON.stringify(r) : resultJson(r));
    }
    return sendJsonText(res, 200, `${text}]}`);
  }

  /**
   * A batch of which a check rejected: waits for every check (their charges recorded), gives back
   * what the batch charged and throws the first failure in the batch's order.
   */
  private async batchFailed(each: readonly Promise<unknown>[], charges: readonly Charge[]): Promise<never> {
    const failed = (await Promise.allSettled(each)).find((s) => s.status === "rejected") as PromiseRejectedResult;
    await this.service.refund(charges, failed.reason);
    throw failed.reason;
  }

  private auth(req: IncomingMessage, res: ServerResponse, query: Query): void | Promise<void> {
    const { input, denyStatus } = authInput(query, authHeaders(req));
    const result = this.service.decideNow(input);
    if (result instanceof Promise) return result.then((r) => this.sendAuth(res, r, denyStatus));
    this.sendAuth(res, result, denyStatus);
  }

  private sendAuth(res: ServerResponse, result: CheckResult, denyStatus: number): void {
    res.writeHead(result.allowed ? 204 : denyStatus, limitHeaderList(result.statuses, this.styles, [], this.service.limiterClock));
    res.end();
  }
}
