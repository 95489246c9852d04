import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from "fastify";
import { HttpRateLimiter, type FrameworkTrust, type RateLimitOptions, type RateLimitResult, type RequestAccess } from "../http/core.js";
import { wireName } from "../http/headers.js";
import { decodedPath, targetPath } from "../http/request-target.js";
import { holdNode, rawForwarded, settleNode } from "./node.js";

/**
 * `ratekeeper/fastify`: rate limiting for Fastify 4 and 5, as a plugin (applies to every route
 * of the instance it is registered on, parent included) or as an `onRequest` hook for one route.
 * Imports only Fastify's types. The client address: through `trustedProxies` when given;
 * otherwise through the server's own `trustProxy` (Fastify's `req.ip`), with a one-time warning
 * (`RK_PERMISSIVE_TRUST_PROXY`) when that is `true`; otherwise the socket's peer.
 * @example
 * import Fastify from "fastify";
 * import { rateLimitPlugin } from "ratekeeper/fastify";
 * const app = Fastify();
 * await app.register(rateLimitPlugin, { limiter: { algorithm: "gcra", limit: 10, window: "1s", burst: 5 } });
 */

const fastifyAccess: RequestAccess<FastifyRequest> = {
  method: (req) => req.method,
  // As Fastify's router matches it: the absolute form's path, percent-decoded, folded as its options say.
  path: (req) => routedPath(decodedPath(targetPath(req.url)), pathFolding(req.server)),
  // The route pattern (`/user/:id`), known in onRequest; undefined when no route matched.
  route: (req) => req.routeOptions.url,
  remoteAddress: (req) => req.raw.socket.remoteAddress,
  header: (req, name) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(", ") : v;
  },
  frameworkTrust: (req) => fastifyTrust(req),
  frameworkIp: (req) => req.ip,
  forwarded: (req) => rawForwarded(req.raw),
};

/** Fastify's router options that route several spellings of a path to one handler. */
interface PathFolding {
  readonly semicolon: boolean;
  readonly duplicateSlashes: boolean;
  readonly trailingSlash: boolean;
  readonly anyCase: boolean;
}
const foldingCache = new WeakMap<object, PathFolding>();

/** The server's router options (`routerOptions`, or the same names beside them as Fastify 4 and early 5 take them). */
function pathFolding(server: object): PathFolding {
  let f = foldingCache.get(server);
  if (f === undefined) {
    const o = serverOptions(server);
    const r = { ...o, ...((o.routerOptions as Record<string, unknown> | undefined) ?? {}) };
    f = {
      semicolon: r.useSemicolonDelimiter === true,
      duplicateSlashes: r.ignoreDuplicateSlashes === true,
      trailingSlash: r.ignoreTrailingSlash === true,
      anyCase: r.caseSensitive === false,
    };
    foldingCache.set(server, f);
  }
  return f;
}

/**
 * A path as Fastify's router (find-my-way) matches it under the server's options: `;` ends it
 * (`useSemicolonDelimiter`), runs of `/` are one (`ignoreDuplicateSlashes`), a trailing `/` is
 * dropped (`ignoreTrailingSlash`), lower case (`caseSensitive: false`). So a client cannot get a
 * fresh allowance by respelling a path the app answers the same way.
 */
function routedPath(path: string, f: PathFolding): string {
  let p = path;
  if (f.semicolon) {
    const i = p.indexOf(";");
    if (i >= 0) p = p.slice(0, i);
  }
  if (f.duplicateSlashes && p.includes("//")) p = p.replace(/\/{2,}/g, "/");
  if (f.trailingSlash && p.length > 1 && p.endsWith("/")) p = p.slice(0, -1);
  return f.anyCase ? p.toLowerCase() : p;
}

/** "No trustProxy", cached like a setting. */
const NO_TRUST: FrameworkTrust = Object.freeze({ setting: "", permissive: false });
const trustCache = new WeakMap<object, FrameworkTrust>();

/**
 * Fastify's `trustProxy` server option. Fastify builds its request class per server and gives it
 * `ips` (and a proxy-aware `ip`) only when `trustProxy` is set, so that is how it is seen; whether
 * it is `true` (trust every hop) is read from the server's options, found by their symbol's name.
 */
function fastifyTrust(req: FastifyRequest): FrameworkTrust | undefined {
  const proto = Object.getPrototypeOf(req) as object;
  let t = trustCache.get(proto);
  if (t === undefined) {
    t = Object.prototype.hasOwnProperty.call(proto, "ips") ? readTrustProxy(req.server) : NO_TRUST;
    trustCache.set(proto, t);
  }
  return t === NO_TRUST ? undefined : t;
}

/**
 * The options the server was made with (`Fastify(options)`), found by their symbol's name on the
 * instance or its prototype chain (a child context's prototype is its parent): read there rather
 * than from `initialConfig`, whose router settings warn as deprecated when read in Fastify 5.
 */
function serverOptions(server: object): Record<string, unknown> {
  for (let o: object | null = server; o !== null; o = Object.getPrototypeOf(o) as object | null) {
    const sym = Object.getOwnPropertySymbols(o).find((x) => x.description === "fastify.options");
    const found = sym === undefined ? undefined : (o as Record<symbol, Record<string, unknown> | undefined>)[sym];
    if (found !== undefined) return found;
  }
  return {};
}

function readTrustProxy(server: object): FrameworkTrust {
  const value = serverOptions(server).trustProxy;
  const shown = value === undefined ? "<set>" : typeof value === "function" ? "<function>" : JSON.stringify(value);
  return { setting: `Fastify({ trustProxy: ${shown} })`, permissive: value === true };
}

/** Options of the Fastify plugin and hook. */
export interface FastifyRateLimitOptions extends RateLimitOptions<FastifyRequest> {
  /**
   * Sends the refusal yourself (429, 403, 500 or 503); headers and `Retry-After` are already on the
   * reply; `result.problem` holds the default body.
   * @example handler: (req, reply, result) => reply.code(result.status).send({ error: "slow down" })
   */
  handler?: (req: FastifyRequest, reply: FastifyReply, result: RateLimitResult) => void | Promise<void>;
}

/** A thrown value as an Error, for Fastify's `done(err)`. */
function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

/**
 * Runs the custom refusal. What it throws or rejects with goes to Fastify's error handling
 * (`done(err)`): after a verdict that came late (an async key, a Redis store) this runs in a
 * promise callback, where a throw would be an unhandled rejection (node ends the process on one)
 * and the request would never be answered.
 */
function refuseWith(
  handler: NonNullable<FastifyRateLimitOptions["handler"]>,
  req: FastifyRequest,
  reply: FastifyReply,
  result: RateLimitResult,
  done: HookHandlerDoneFunction,
): void {
  let out: void | Promise<void>;
  try {
    out = handler(req, reply, result);
  } catch (e) {
    done(asError(e));
    return;
  }
  if (out instanceof Promise) out.catch((e: unknown) => done(asError(e)));
}

/** The hook, with its framework-neutral core attached. */
export type FastifyRateLimitHook = onRequestHookHandler & { readonly core: HttpRateLimiter<FastifyRequest> };

/**
 * Creates an `onRequest` hook that limits requests: for one route
 * (`app.post("/user", { onRequest: rateLimitHook(opts) }, handler)`) or globally (`app.addHook`).
 * @throws RateLimitConfigError naming every bad option
 */
export function rateLimitHook(options: FastifyRateLimitOptions): FastifyRateLimitHook {
  const core = new HttpRateLimiter(options, fastifyAccess);
  const handler = options.handler;
  const apply = (result: RateLimitResult, req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const h = result.headers;
    // Lower-case names ({@link wireName}): Fastify lower-cases every name it is given, a new string
    // per mixed-case name.
    for (let i = 0; i < h.length; i++) void reply.header(wireName((h[i] as [string, string])[0]), (h[i] as [string, string])[1]);
    if (!result.pass) {
      // Fastify's rule for callback hooks that answer early: send, and do not call done().
      if (handler === undefined) void reply.code(result.status).type(result.contentType).send(result.body);
      else refuseWith(handler, req, reply, result, done);
      return;
    }
    if (result.delayMs > 0) {
      holdNode(core, result, req, reply.raw).then(
        (ok) => {
          if (!ok) {
            // The client left while queued (its place was given back); nobody reads this answer.
            void reply.code(499).send();
            return;
          }
          settleNode(core, result, req, reply.raw);
          done();
        },
        (e: unknown) => done(asError(e)),
      );
      return;
    }
    settleNode(core, result, req, reply.raw);
    done();
  };
  // A callback-style hook: with the memory store the request moves on in the same tick.
  function ratekeeperOnRequest(this: FastifyInstance, req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const r = core.check(req);
    if (r instanceof Promise)
      r.then(
        (x) => apply(x, req, reply, done),
        (e: unknown) => done(asError(e)),
      );
    else apply(r, req, reply, done);
  }
  return Object.assign(ratekeeperOnRequest as onRequestHookHandler, { core });
}

/**
 * The plugin form: `app.register(rateLimitPlugin, options)`. Marked with `skip-override` (what
 * fastify-plugin does) so its hook applies to the instance it is registered on rather than to a
 * new encapsulated child; register it inside a child context to limit only that context.
 */
export function rateLimitPlugin(app: FastifyInstance, options: FastifyRateLimitOptions, done: (err?: Error) => void): void {
  try {
    app.addHook("onRequest", rateLimitHook(options));
    done();
  } catch (e) {
    done(asError(e));
  }
}
// fastify-plugin's marker, set by hand so the library has no runtime dependency on it.
(rateLimitPlugin as unknown as Record<symbol, unknown>)[Symbol.for("skip-override")] = true;
(rateLimitPlugin as unknown as Record<symbol, unknown>)[Symbol.for("fastify.display-name")] = "ratekeeper";
