import type { Context, MiddlewareHandler, Next } from "hono";
import { HttpRateLimiter, type RateLimitOptions, type RateLimitResult, type RequestAccess } from "../http/core.js";
import { wireName } from "../http/headers.js";
import { untilDone } from "./body-watch.js";

/**
 * `ratekeeper/hono`: rate-limiting middleware for Hono 4. Imports only Hono's types.
 *
 * The client address: Hono has no runtime-neutral socket, so by default it is read where each
 * runtime puts it (see {@link runtimeRemoteAddress}): `@hono/node-server`, Deno, Bun, Cloudflare
 * Workers, AWS Lambda, Lambda@Edge and Netlify; elsewhere pass `getRemoteAddress`.
 * Nothing here needs Node: the same app runs on each of them unchanged.
 * @example
 * import { Hono } from "hono";
 * import { rateLimit } from "ratekeeper/hono";
 * const app = new Hono();
 * app.use(rateLimit({ limiter: { algorithm: "sliding-window", limit: 100, window: "1m" } }));
 */

/** The shape of `@hono/node-server`'s bindings that the default address reader needs. */
interface NodeBindings {
  incoming?: { socket?: NodeSocket; headers?: Record<string, string | string[] | undefined> };
  outgoing?: {
    /** null while a pipelined request's response waits behind the answer before it. */
    socket?: unknown;
    setHeader?: (name: string, value: string) => unknown;
    headersSent?: boolean;
    writableFinished?: boolean;
    /** Set once the response has closed (finished, or the client left): its 'close' has fired. */
    closed?: boolean;
    once?: (event: "close", listener: () => void) => unknown;
  };
}

/** The part of a Node socket read here. */
interface NodeSocket {
  remoteAddress?: string;
  destroyed?: boolean;
  once?: (event: "close", listener: () => void) => unknown;
  off?: (event: "close", listener: () => void) => unknown;
}

/**
 * The signal that says the client left, for a shaped request's hold: the request's own, and on
 * @hono/node-server, for a pipelined request whose response waits unattached behind the answer
 * before it, also its socket's 'close' (the request's signal never aborts then).
 * @returns the signal, and what to call once the hold is over
 */
function goneSignal(c: Context): [AbortSignal, () => void] {
  const signal = c.req.raw.signal;
  const env = c.env as NodeBindings | undefined;
  const socket = env?.outgoing !== undefined && env.outgoing.socket === null ? env.incoming?.socket : undefined;
  if (socket === undefined || typeof socket.once !== "function" || typeof socket.off !== "function") return [signal, nothing];
  const ac = new AbortController();
  const abort = (): void => ac.abort();
  if (signal.aborted || socket.destroyed === true) abort();
  signal.addEventListener("abort", abort, { once: true });
  socket.once("close", abort);
  return [
    ac.signal,
    () => {
      signal.removeEventListener("abort", abort);
      socket.off?.("close", abort);
    },
  ];
}

/** Deno.serve's handler info (`c.env` when the app is served with `Deno.serve(app.fetch)`). */
interface DenoBindings {
  remoteAddr?: { hostname?: string };
}

/** Bun's server (`c.env` when the app is served by `Bun.serve` or `export default app`). */
interface BunBindings {
  requestIP?: (request: Request) => { address?: string } | null;
}

/**
 * The serverless platforms' records of the client, set by the platform (not from headers), as
 * Hono's adapters hand them over in `c.env`: `hono/aws-lambda` (API Gateway REST, HTTP API and
 * function URLs), `hono/lambda-edge` (CloudFront) and `hono/netlify`.
 */
interface ServerlessBindings {
  requestContext?: { identity?: { sourceIp?: unknown }; http?: { sourceIp?: unknown } };
  event?: { Records?: Array<{ cf?: { request?: { clientIp?: unknown } } }> };
  context?: { ip?: unknown };
}

/** A serverless platform's record of the client (see {@link ServerlessBindings}), if the bindings hold one. */
function serverlessAddress(env: ServerlessBindings): string | undefined {
  const rc = env.requestContext;
  const ip =
    rc !== undefined ? (rc.identity?.sourceIp ?? rc.http?.sourceIp) : (env.event?.Records?.[0]?.cf?.request?.clientIp ?? env.context?.ip);
  return typeof ip === "string" ? ip : undefined;
}

/** Whether this is Cloudflare's Workers runtime (workerd), as it names itself. */
const onWorkers = (globalThis as { navigator?: { userAgent?: unknown } }).navigator?.userAgent === "Cloudflare-Workers";

/**
 * The socket peer's address as the runtime reports it, the same places Hono's `getConnInfo`
 * helpers read:
 * - `@hono/node-server`: its bindings' Node socket (`c.env.incoming.socket.remoteAddress`);
 * - Deno (`Deno.serve(app.fetch)`): the handler info's `remoteAddr.hostname`;
 * - Bun (`Bun.serve`, `export default app`): `server.requestIP(request)`;
 * - AWS Lambda (`hono/aws-lambda`): API Gateway's `requestContext.identity.sourceIp` (REST) or
 *   `requestContext.http.sourceIp` (HTTP API, function URLs); an ALB event has none (only the
 *   client-writable X-Forwarded-For: pass `getRemoteAddress`);
 * - Lambda@Edge (`hono/lambda-edge`): CloudFront's `clientIp`; Netlify (`hono/netlify`): `context.ip`;
 * - Cloudflare Workers: the `CF-Connecting-IP` header, which Cloudflare's edge sets to the
 *   connecting client (overwriting any the client sent); read only on workerd, never elsewhere,
 *   where it would be client input.
 * Returns `undefined` when none applies (then `noAddress` decides). On Vercel, whose `X-Real-IP`
 * only its edge can vouch for, pass `getRemoteAddress: (c) => c.req.header("x-real-ip")`.
 */
export function runtimeRemoteAddress(c: Context): string | undefined {
  const env = c.env as (NodeBindings & DenoBindings & BunBindings & ServerlessBindings) | undefined;
  if (env !== undefined && env !== null) {
    const node = env.incoming?.socket;
    if (node !== undefined) return node.remoteAddress;
    if (typeof env.remoteAddr === "object" && env.remoteAddr !== null) return env.remoteAddr.hostname;
    if (typeof env.requestIP === "function") return env.requestIP(c.req.raw)?.address ?? undefined;
    const serverless = serverlessAddress(env);
    if (serverless !== undefined) return serverless;
  }
  return onWorkers ? c.req.header("cf-connecting-ip") : undefined;
}

/** Options of the Hono middleware. */
export interface HonoRateLimitOptions extends RateLimitOptions<Context> {
  /**
   * Reads the socket peer's address.
   * @default runtimeRemoteAddress: @hono/node-server, Deno, Bun, Cloudflare Workers, AWS Lambda, Lambda@Edge, Netlify
   */
  getRemoteAddress?: (c: Context) => string | undefined;
  /**
   * Builds the refusal yourself (429, 403, 500 or 503); the rate-limit headers are added to it.
   * `result.problem` holds the default body.
   * @example handler: (c, result) => c.json({ error: "slow down" }, 429)
   */
  handler?: (c: Context, result: RateLimitResult) => Response | Promise<Response>;
}

/** The middleware, with its framework-neutral core attached. */
export type HonoRateLimit = MiddlewareHandler & { readonly core: HttpRateLimiter<Context> };

/**
 * A request header. On `@hono/node-server` over HTTP/1.1 a header the request does not carry is
 * answered from the Node request's own header object: node lists every name the request sent
 * there (lower case), so a name missing from it is missing from the request, and Hono's
 * `c.req.header()` (a WHATWG `Headers` lookup: a name check, a lower-case copy, then this same
 * object) would return `undefined` too. The middleware asks for two absent headers on almost every
 * request (`X-Forwarded-For` and `Forwarded`, for the forwarded-header check). A header that is
 * there is always read through `c.req.header()`, so values (joined duplicates, trimming) are Hono's.
 */
function honoHeader(c: Context, name: string): string | undefined {
  const headers = (c.env as NodeBindings | undefined)?.incoming?.headers;
  if (headers !== undefined && headers !== null && !Object.prototype.hasOwnProperty.call(headers, name) && name === name.toLowerCase()) {
    return undefined;
  }
  return c.req.header(name);
}

/** Resolves a promise to undefined. */
function nothing(): undefined {
  return undefined;
}

/** The Node response of `@hono/node-server`, when its headers can still be set. */
function nodeOutgoing(c: Context): NodeBindings["outgoing"] | undefined {
  const out = (c.env as NodeBindings | undefined)?.outgoing;
  return out !== undefined && typeof out.setHeader === "function" && out.headersSent !== true ? out : undefined;
}

/**
 * The default refusal: status, body and every header in the constructor, as one plain object with
 * lower-case names ({@link wireName}), and `res.headers` never read: on @hono/node-server this
 * Response is written straight to the socket by one `writeHead`, no WHATWG Headers built.
 */
function refusalResponse(result: RateLimitResult): Response {
  const h = result.headers;
  const headers: Record<string, string> = { "content-type": result.contentType };
  for (let i = 0; i < h.length; i++) headers[wireName((h[i] as [string, string])[0])] = (h[i] as [string, string])[1];
  return new Response(result.body, { status: result.status, headers });
}

/**
 * Sets an admitted request's headers. On @hono/node-server on its Node response (`c.env.outgoing`),
 * whose writeHead merges them into the answer: c.header() would build a WHATWG Headers object per
 * request, which measured several µs (docs/benchmarks/http.md). Elsewhere (other runtimes,
 * app.request()), c.header().
 */
function setHeaders(c: Context, h: [string, string][], out: NodeBindings["outgoing"] | undefined): void {
  if (out !== undefined) {
    const set = out.setHeader as (name: string, value: string) => unknown;
    for (let i = 0; i < h.length; i++) set.call(out, wireName((h[i] as [string, string])[0]), (h[i] as [string, string])[1]);
  } else {
    for (let i = 0; i < h.length; i++) c.header((h[i] as [string, string])[0], (h[i] as [string, string])[1]);
  }
}

/**
 * Settles a request that held a lease (gives the lease back, and the `countOnly` refund) once its
 * response is done. On @hono/node-server when its Node response closes. Elsewhere (Bun, Deno,
 * Workers, app.request()) there is no Node response to watch, and a streamed body is still in
 * flight when the handler returns: settled when the body ends or is cancelled, or `leaseMs` after
 * now if nobody has begun reading it (dropped unread: see {@link untilDone}). HEAD runs the GET
 * handler and Hono drops its body unread (never cancelled): settled now.
 */
function settleWhenDone(core: HttpRateLimiter<Context>, c: Context, result: RateLimitResult, out: NodeBindings["outgoing"]): void {
  const status = c.res.status;
  const settle = (): void => core.settle(result, status, c);
  if (out !== undefined && typeof out.once === "function") {
    if (out.writableFinished !== true && out.closed !== true) out.once("close", settle);
    else settle();
    return;
  }
  const body = c.res.body;
  if (body !== null && !body.locked && !c.req.raw.signal.aborted && c.req.raw.method !== "HEAD") {
    c.res = new Response(untilDone(body, settle, core.leaseMs ?? 0), c.res);
  } else settle();
}

/**
 * `res` with the rate-limit headers added. A Response whose headers are immutable
 * (`Response.redirect()`, a `fetch()` answer) is copied first, with headers of its own.
 */
function withHeaders(res: Response, h: [string, string][]): Response {
  let out = res;
  try {
    for (let i = 0; i < h.length; i++) out.headers.set((h[i] as [string, string])[0], (h[i] as [string, string])[1]);
  } catch {
    out = new Response(res.body, res);
    for (let i = 0; i < h.length; i++) out.headers.set((h[i] as [string, string])[0], (h[i] as [string, string])[1]);
  }
  return out;
}

/**
 * Creates Hono middleware that limits requests.
 * @throws RateLimitConfigError naming every bad option
 * @example app.post("/user", rateLimit({ limiter, cost: { "GET /user": 1, "POST /user": 2 } }), handler)
 */
export function rateLimit(options: HonoRateLimitOptions): HonoRateLimit {
  const getRemoteAddress = options.getRemoteAddress ?? runtimeRemoteAddress;
  const access: RequestAccess<Context> = {
    method: (c) => c.req.method,
    path: (c) => c.req.path,
    route: () => undefined,
    remoteAddress: getRemoteAddress,
    header: honoHeader,
  };
  const core = new HttpRateLimiter(options, access);
  const handler = options.handler;
  /** The verdict applied; a promise only when something has to be awaited. */
  const apply = (c: Context, next: Next, result: RateLimitResult): Promise<Response | void> => {
    if (!result.pass) {
      if (handler === undefined) return Promise.resolve(refusalResponse(result));
      return refuseWith(c, result);
    }
    const out = nodeOutgoing(c);
    setHeaders(c, result.headers, out);
    // The common case (no shaping delay, no refund, no lease): no async frame of our own. next()'s
    // promise resolves to Hono's Context, which must not come back as our answer (compose would take
    // it for a Response when nothing downstream answered): hence the then(), to undefined.
    if (result.delayMs <= 0 && result.lease === undefined && !result.settles) return next().then(nothing);
    return proceed(c, next, result, (c.env as NodeBindings | undefined)?.outgoing);
  };
  /** A custom refusal, with the rate-limit headers added to it. */
  const refuseWith = async (c: Context, result: RateLimitResult): Promise<Response> => {
    return withHeaders(await (handler as NonNullable<HonoRateLimitOptions["handler"]>)(c, result), result.headers);
  };
  /** The rest of an admitted request: shaping delay, `countOnly` refund, lease. */
  const proceed = async (c: Context, next: Next, result: RateLimitResult, out: NodeBindings["outgoing"]): Promise<Response | void> => {
    if (result.delayMs > 0) {
      const [signal, done] = goneSignal(c);
      const ok = await core.hold(result, signal, c);
      done();
      // The client left while queued (its place was given back); nobody reads this answer.
      if (!ok) return new Response(null, { status: 499 });
    }
    if (result.lease === undefined) {
      await next();
      if (result.settles) core.settle(result, c.res.status, c);
      return;
    }
    // A lease (option `concurrency`) goes back when the response is done (settleWhenDone), a streamed
    // body included, or at once if the client goes away first. A client that left while the lease was being acquired
    // (a slow store) has aborted already and its response has closed: neither event fires again.
    const signal = c.req.raw.signal;
    const gone = (): void => core.releaseLease(result, c);
    if (signal.aborted) gone();
    else signal.addEventListener("abort", gone, { once: true });
    try {
      await next();
    } finally {
      signal.removeEventListener("abort", gone);
      settleWhenDone(core, c, result, out);
    }
  };
  // Not an async function: a request that simply goes on costs no promise of its own. Whatever
  // goes wrong still comes back as a rejected promise, never as a throw.
  const middleware: MiddlewareHandler = function ratekeeper(c, next) {
    try {
      const r = core.check(c);
      return r instanceof Promise ? r.then((x) => apply(c, next, x)) : apply(c, next, r);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  };
  return Object.assign(middleware, { core });
}
