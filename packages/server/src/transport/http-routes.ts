/**
 * The HTTP API's routes other than the two decision routes, one function each, and the table
 * that finds them. transport/http.ts answers `/v1/check` and `/v1/auth` itself (the hot path: no
 * lookup, no object per request) and hands every other request to {@link routeOf}'s route with
 * an {@link HttpCall}; each route checks its method, does its work and answers, or throws an
 * `HttpError` (sent with the status of its code).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { HeaderStyle } from "ratekeeper/http";
import type { Rules } from "../config/rules.js";
import type { Dashboard } from "../dashboard/routes.js";
import { HttpError, methodNotAllowed, readJson, sendJson, sendJsonText, type TokenCheck } from "../http-io.js";
import type { Metrics } from "../metrics.js";
import type { DecisionService } from "../service/decide.js";
import type { LeaseService } from "../service/leases.js";
import { unauthorized, type AdminHandler } from "./admin.js";
import { keysInput, type Query } from "./check-input.js";
import { envoyHealthcheck, envoyJson, type EnvoyHttpOptions } from "./envoy-http.js";
import { limitHeaderList, resultBody } from "./render.js";

/** What the routes use, resolved once by `createHttpServer`. */
export interface HttpContext {
  readonly service: DecisionService;
  readonly metrics: Metrics;
  /** Whether the service may take traffic (`/readyz`). */
  readonly readiness: () => { ready: boolean; reason?: string | undefined };
  /** Largest request body, in bytes. */
  readonly maxBody: number;
  /** Limit header styles of `/v1/keys/*`. */
  readonly styles: readonly HeaderStyle[];
  readonly leases: LeaseService;
  /** The admin API (/v1/admin/*), on only with a token, checked by {@link admin} before handing a request over. */
  readonly admin: { readonly handler: AdminHandler; readonly token: TokenCheck } | undefined;
  /** `/json` and `/healthcheck`, answered as envoyproxy/ratelimit answers them. */
  readonly envoy: EnvoyHttpOptions;
  /** `/dashboard` and below; undefined: 404. */
  readonly dashboard: Dashboard | undefined;
}

/** One request routed here. */
export interface HttpCall {
  readonly ctx: HttpContext;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly method: string | undefined;
  /** The URL's path, without the query. */
  readonly path: string;
  readonly query: Query;
}

/** What one route does; it answers through `call.res` or throws an `HttpError`. */
export type HttpRoute = (call: HttpCall) => void | Promise<void>;

/** `GET /v1/keys/{key}`: the key's state under its limits, charging nothing. */
async function keys({ ctx, res, method, path, query }: HttpCall): Promise<void> {
  if (method !== "GET") throw methodNotAllowed("GET");
  const result = await ctx.service.peek(keysInput(path.slice("/v1/keys/".length), query));
  const body = resultBody(result);
  sendJsonText(res, 200, body.text, limitHeaderList(result.statuses, ctx.styles, [], ctx.service.limiterClock), body.bytes);
}

/** `POST /v1/leases/{acquire,renew,release}`: acquire (200, or 429 with Retry-After when every slot is held), renew, release. */
async function leases({ ctx, req, res, method, path }: HttpCall): Promise<void> {
  if (method !== "POST") throw methodNotAllowed("POST");
  const op = path.slice("/v1/leases/".length);
  const body = await readJson(req, ctx.maxBody);
  if (op === "acquire") {
    const grant = await ctx.leases.acquire(body);
    // Only this answer carries the lease's id: a client gone before it is out (it left while the
    // lease was being acquired, or before the answer was written) can never release the lease,
    // which would hold its slot until it expires. Given back instead.
    if (grant.acquired && grant.id !== undefined) {
      const id = grant.id;
      const giveBack = (): void => void ctx.leases.release({ pool: grant.pool, key: grant.key, id }).catch(() => undefined);
      if (res.closed) return giveBack();
      res.once("close", () => {
        if (!res.writableFinished) giveBack();
      });
    }
    const headers = grant.acquired ? undefined : { "retry-after": String(Math.max(1, Math.ceil(grant.retryAfterMs / 1000))) };
    return sendJson(res, grant.acquired ? 200 : 429, grant, headers);
  }
  if (op === "renew") return sendJson(res, 200, { renewed: await ctx.leases.renew(body) });
  if (op === "release") return sendJson(res, 200, { released: await ctx.leases.release(body) });
  throw new HttpError("not_found", `no route POST /v1/leases/${op.slice(0, 32)} (acquire, renew, release)`);
}

/** `/healthz`: the process answers. */
function healthz({ res }: HttpCall): void {
  sendJson(res, 200, { status: "ok" });
}

/** `/readyz`: 200 when the service may take traffic, else 503 with the reason. */
function readyz({ ctx, res }: HttpCall): void {
  const r = ctx.readiness();
  sendJson(res, r.ready ? 200 : 503, r.ready ? { status: "ready" } : { status: "not ready", reason: r.reason ?? "unknown" });
}

/** `/metrics`: the Prometheus text. */
async function metrics({ ctx, res }: HttpCall): Promise<void> {
  const text = await ctx.metrics.registry.metrics();
  res.writeHead(200, { "content-type": ctx.metrics.registry.contentType });
  res.end(text);
}

/**
 * `GET /v1/rules`: the rules in force, as the file gave them. Where they were read from (`source`,
 * an absolute path: the server's filesystem layout) only for a caller with the admin token: the
 * route itself needs none.
 */
function rules({ ctx, req, res }: HttpCall): void {
  const admin = ctx.admin !== undefined && req.headers.authorization !== undefined && ctx.admin.token.matches(req.headers.authorization);
  sendJson(res, 200, rulesDocument(ctx.service.rules, admin));
}

function rulesDocument(rules: Rules, withSource: boolean): object {
  return {
    ...(withSource ? { source: rules.source } : {}),
    domains: [...rules.domains.keys()],
    policies: Object.fromEntries([...rules.policies.values()].map((p) => [p.name, p.specs])),
    concurrency: Object.fromEntries([...rules.pools.values()].map((p) => [p.name, { limit: p.limit, leaseMs: p.leaseMs }])),
    rules: rules.rules.map((r) => ({
      id: r.id,
      path: r.path,
      unlimited: r.unlimited,
      shadow: r.shadow,
      cost: r.cost,
      limits: r.specs,
    })),
  };
}

/** `/dashboard` and below: the dashboard's page and data (it checks the admin token itself). */
function dashboard({ ctx, req, res, path }: HttpCall): void | Promise<void> {
  if (!ctx.dashboard) throw new HttpError("not_found", "the dashboard is off (started with --no-dashboard)");
  return ctx.dashboard.handle(req, res, path);
}

/** `/v1/admin/*`: the token checked here, then the admin handler (transport/admin.ts). */
async function admin({ ctx, req, res, method, path }: HttpCall): Promise<void> {
  if (!ctx.admin)
    throw new HttpError("not_found", "the admin API is off (start with --admin-token-file, RATEKEEPER_ADMIN_TOKEN or --admin-token)");
  if (!ctx.admin.token.matches(req.headers.authorization)) throw unauthorized();
  if (await ctx.admin.handler(req, res)) return;
  throw new HttpError("not_found", `no admin route ${method ?? ""} ${path}`);
}

/** The routes by exact path. */
const EXACT: ReadonlyMap<string, HttpRoute> = new Map<string, HttpRoute>([
  ["/healthz", healthz],
  ["/json", ({ ctx, req, res }) => envoyJson(req, res, ctx.envoy)],
  ["/healthcheck", ({ ctx, res }) => envoyHealthcheck(res, ctx.envoy)],
  ["/readyz", readyz],
  ["/metrics", metrics],
  ["/v1/rules", rules],
  ["/dashboard", dashboard],
  ["/v1/admin", admin],
]);

/** The routes of every path under a prefix (no exact path above starts with one of these). */
const PREFIXES: ReadonlyArray<readonly [string, HttpRoute]> = [
  ["/v1/keys/", keys],
  ["/v1/leases/", leases],
  ["/dashboard/", dashboard],
  ["/v1/admin/", admin],
];

/**
 * The route of `path` (without its query), or undefined: 404.
 * @example const route = routeOf("/readyz"); if (route) await route({ ctx, req, res, method, path, query });
 */
export function routeOf(path: string): HttpRoute | undefined {
  const exact = EXACT.get(path);
  if (exact) return exact;
  for (const [prefix, route] of PREFIXES) if (path.startsWith(prefix)) return route;
  return undefined;
}
