import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { HttpRateLimiter, type RateLimitOptions, type RateLimitResult, type RequestAccess } from "../http/core.js";
import { wireName } from "../http/headers.js";
import { targetPath } from "../http/request-target.js";

/**
 * `ratekeeper/node`: rate limiting for a plain `node:http` server.
 * @example
 * import http from "node:http";
 * import { rateLimit } from "ratekeeper/node";
 * const limit = rateLimit({ limiter: { algorithm: "sliding-window", limit: 100, window: "1m" } });
 * http.createServer(async (req, res) => {
 *   if (!(await limit(req, res))) return; // answered 429 (or the client left while shaped)
 *   res.end("hello");
 * }).listen(3000);
 */

/**
 * Which forwarding header a node request carries (`X-Forwarded-For` first), from its raw header
 * list. Reading `req.headers` instead would make node build the whole header object, which it
 * does lazily on first read and which a plain listener never asks for (about 0.3 µs a request,
 * docs/benchmarks/http.md). A request without `rawHeaders` (a stand-in object) is read through
 * `req.headers`.
 */
export function rawForwarded(req: IncomingMessage): "X-Forwarded-For" | "Forwarded" | undefined {
  const raw = req.rawHeaders as string[] | undefined;
  if (raw === undefined) {
    const h = req.headers;
    return h["x-forwarded-for"] !== undefined ? "X-Forwarded-For" : h.forwarded !== undefined ? "Forwarded" : undefined;
  }
  let found: "Forwarded" | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 15 && name.toLowerCase() === "x-forwarded-for") return "X-Forwarded-For";
    if (name.length === 9 && name.toLowerCase() === "forwarded") found = "Forwarded";
  }
  return found;
}

/** How the core reads a `node:http` request (also used by the Express adapter). */
export const nodeAccess: RequestAccess<IncomingMessage> = {
  method: (req) => req.method ?? "GET",
  path: (req) => targetPath(req.url ?? "/"),
  route: () => undefined,
  remoteAddress: (req) => req.socket.remoteAddress,
  header: (req, name) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(", ") : v;
  },
  forwarded: rawForwarded,
};

/** Options of the `node:http` adapter. */
export interface NodeRateLimitOptions extends RateLimitOptions<IncomingMessage> {
  /**
   * Sends the refusal yourself (429, 403, 500 or 503). The rate-limit headers and `Retry-After` are
   * already set on `res`; `result.problem` holds the default body.
   */
  handler?: (req: IncomingMessage, res: ServerResponse, result: RateLimitResult) => void | Promise<void>;
}

/** A `node:http` rate limiter: resolves `true` to go on, `false` when it answered (or the client left). */
export interface NodeRateLimit {
  (req: IncomingMessage, res: ServerResponse): Promise<boolean>;
  /** The framework-neutral core (its `limiter`, `clientIp()`). */
  readonly core: HttpRateLimiter<IncomingMessage>;
}

/**
 * Whether the response has closed (it finished, or the client left), so that its 'close' has
 * fired already and will not again. node:http's response says so (`closed`); node:http2's
 * compatibility response (`http2.createServer(listener)`, `Fastify({ http2: true })`) has no such
 * flag, and its stream is destroyed once it closes.
 */
function responseClosed(res: ServerResponse): boolean {
  if (res.closed) return true;
  const stream = (res as { stream?: { destroyed?: unknown } }).stream;
  return stream !== undefined && stream !== null && stream.destroyed === true;
}

/**
 * The status of a response that has closed, or `undefined` when it closed before it was all sent
 * (the client left). node:http2's compatibility response counts as finished once it closes,
 * however it closed; only its `writableEnded` says whether the app ended it.
 */
function closedStatus(res: ServerResponse): number | undefined {
  return res.writableFinished && res.writableEnded ? res.statusCode : undefined;
}

/**
 * Waits out a shaping delay on a `node:http` response; a client that disconnects meanwhile (or
 * already did) gives its place back. Resolves whether to go on.
 */
export async function holdNode<Req>(core: HttpRateLimiter<Req>, result: RateLimitResult, req: Req, res: ServerResponse): Promise<boolean> {
  if (result.delayMs <= 0) return true;
  const ac = new AbortController();
  // The client left while the verdict was being made (a slow store): the response has closed
  // already and no `close` comes again, so the place is given back now, not after the delay.
  if (responseClosed(res)) ac.abort();
  const onClose = (): void => ac.abort();
  // A pipelined request's response waits unattached (no socket yet) behind the answer before it,
  // and emits no 'close' when the client goes away: its request's socket tells.
  const socket = res.socket === null ? ((res.req as IncomingMessage | undefined)?.socket as Socket | null | undefined) : undefined;
  if (socket?.destroyed === true) ac.abort();
  res.once("close", onClose);
  socket?.once("close", onClose);
  const ok = await core.hold(result, ac.signal, req);
  res.off("close", onClose);
  socket?.off("close", onClose);
  return ok;
}

/**
 * After the response: gives the lease back (option `concurrency`) and, with `countOnly`, refunds
 * according to its status (a client gone first counts as failed). Also when the request's socket
 * closes: a response not attached to it (express-ws routes a WebSocket upgrade through the app on
 * a `new ServerResponse(req)` of its own) never finishes or closes, and the lease, renewed while
 * the request is in flight, would be held for good; a socket taken over by an upgrade holds it
 * until it closes.
 */
export function settleNode<Req>(core: HttpRateLimiter<Req>, result: RateLimitResult, req: Req, res: ServerResponse): void {
  if (!result.settles) return;
  // The client left while the verdict was being made (a lease granted by a slow store): the
  // response has closed already, and neither event below would ever fire.
  if (responseClosed(res)) {
    core.settle(result, closedStatus(res), req);
    return;
  }
  // A response on its socket closes with it (node emits its 'close'): only one not attached to
  // a socket (yet) needs the socket's own event, so most requests add no listener to it.
  const socket = res.socket === null ? ((res.req as IncomingMessage | undefined)?.socket as Socket | null | undefined) : undefined;
  let settled = false;
  const settle = (status: number | undefined): void => {
    if (settled) return;
    settled = true;
    socket?.off("close", gone);
    core.settle(result, status, req);
  };
  const gone = (): void => settle(undefined);
  if (socket?.destroyed === true) {
    settle(undefined);
    return;
  }
  res.once("finish", () => settle(res.statusCode));
  res.once("close", gone);
  socket?.once("close", gone);
}

/**
 * Sets the headers and, for a refusal, sends the default problem+json body. A refusal is written
 * whole, with one `writeHead` (its headers as one flat list) and `end`: no `setHeader` per header,
 * each of which validates, lower-cases and stores its name for a later `writeHead` to read back.
 * Names go to node in lower case ({@link wireName}): node would otherwise make a lower-case copy of each.
 */
export function writeNode(result: RateLimitResult, res: ServerResponse): void {
  const h = result.headers;
  if (!result.pass && result.body !== undefined) {
    const flat: string[] = new Array<string>(2 * h.length + 2);
    for (let i = 0; i < h.length; i++) {
      flat[2 * i] = wireName((h[i] as [string, string])[0]);
      flat[2 * i + 1] = (h[i] as [string, string])[1];
    }
    flat[2 * h.length] = "content-type";
    flat[2 * h.length + 1] = result.contentType;
    res.writeHead(result.status, flat);
    res.end(result.body);
    return;
  }
  for (let i = 0; i < h.length; i++) res.setHeader(wireName((h[i] as [string, string])[0]), (h[i] as [string, string])[1]);
}

/**
 * Applies a verdict to a `node:http` response (shared with the Express adapter): sets the
 * headers, sends a refusal (through `refuse` when given), holds a shaped request, and arranges
 * the `countOnly` refund. Returns whether to go on: synchronously unless something must be
 * awaited (a custom refusal, a shaping delay).
 */
export function applyNode<Req>(
  core: HttpRateLimiter<Req>,
  result: RateLimitResult,
  req: Req,
  res: ServerResponse,
  refuse: ((result: RateLimitResult) => void | Promise<void>) | undefined,
): boolean | Promise<boolean> {
  if (!result.pass) {
    if (refuse === undefined) {
      writeNode(result, res);
      return false;
    }
    for (const [k, v] of result.headers) res.setHeader(k, v);
    const done = refuse(result);
    return done instanceof Promise ? done.then(() => false) : false;
  }
  try {
    writeNode(result, res);
  } catch (e) {
    // Headers a middleware before this one already sent (setHeader throws): the request goes to
    // the framework's error handling, and its lease and charge would never come back.
    core.release(result, req);
    throw e;
  }
  if (result.delayMs > 0) {
    return holdNode(core, result, req, res).then((ok) => {
      if (ok) settleNode(core, result, req, res);
      return ok;
    });
  }
  settleNode(core, result, req, res);
  return true;
}

/** Checks and applies: `true` to go on, `false` when answered; a promise only when it had to wait. */
function gate(core: HttpRateLimiter<IncomingMessage>, handler: NodeRateLimitOptions["handler"]) {
  // The custom refusal is bound to its request only for a refusal: an admitted request costs no closure.
  const apply = (x: RateLimitResult, req: IncomingMessage, res: ServerResponse): boolean | Promise<boolean> =>
    applyNode(core, x, req, res, handler === undefined || x.pass ? undefined : (r: RateLimitResult) => handler(req, res, r));
  return (req: IncomingMessage, res: ServerResponse): boolean | Promise<boolean> => {
    const r = core.check(req);
    return r instanceof Promise ? r.then((x) => apply(x, req, res)) : apply(r, req, res);
  };
}

/**
 * Creates a rate limiter for `node:http`: `await limit(req, res)` is `true` when the request may go
 * on (after any shaping delay), `false` when the limiter has answered it.
 * @throws RateLimitConfigError naming every bad option
 * @example
 * const limit = rateLimit({ limits: [{ algorithm: "fixed-window", limit: 100, window: "1m" }], headers: "x-ratelimit" });
 */
export function rateLimit(options: NodeRateLimitOptions): NodeRateLimit {
  const core = new HttpRateLimiter(options, nodeAccess);
  const g = gate(core, options.handler);
  const limit = (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    try {
      return Promise.resolve(g(req, res));
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  };
  return Object.assign(limit, { core });
}

/**
 * Wraps a `node:http` request listener so that it only sees requests the limiter lets through.
 * With the memory store the listener is called synchronously, in the same tick as the request.
 * @example http.createServer(withRateLimit({ limiter }, (req, res) => res.end("ok")))
 */
export function withRateLimit(
  options: NodeRateLimitOptions,
  // unknown, as node:http's own listener type allows: `(req, res) => res.end("ok")` returns the response.
  listener: (req: IncomingMessage, res: ServerResponse) => unknown,
): (req: IncomingMessage, res: ServerResponse) => void {
  const core = new HttpRateLimiter(options, nodeAccess);
  const g = gate(core, options.handler);
  // Only a throwing custom handler or listener lands here (check() never throws): answer, never hang.
  const fail = (res: ServerResponse): void => {
    if (!res.headersSent) res.statusCode = 500;
    res.end();
  };
  const run = (req: IncomingMessage, res: ServerResponse): void => {
    const out = listener(req, res);
    if (out instanceof Promise) out.catch(() => fail(res));
  };
  return (req, res) => {
    try {
      const go = g(req, res);
      if (go === true) run(req, res);
      else if (go !== false) go.then((ok) => (ok ? run(req, res) : undefined)).catch(() => fail(res));
    } catch {
      fail(res);
    }
  };
}
