import type { NextFunction, Request, RequestHandler, Response } from "express";
import { HttpRateLimiter, type FrameworkTrust, type RateLimitOptions, type RateLimitResult, type RequestAccess } from "../http/core.js";
import { applyNode, nodeAccess } from "./node.js";

/**
 * `ratekeeper/express`: rate-limiting middleware for Express 4 and 5. Imports only Express's
 * types. The client address: through `trustedProxies` when given; otherwise through the app's
 * own `app.set("trust proxy", ...)` (Express's `req.ip`), with a one-time warning
 * (`RK_PERMISSIVE_TRUST_PROXY`) when that trusts every hop; otherwise the socket's peer.
 * @example
 * import express from "express";
 * import { rateLimit } from "ratekeeper/express";
 * const app = express();
 * app.use(rateLimit({ limiter: { algorithm: "sliding-window", limit: 100, window: "1m" } }));
 */

const expressAccess: RequestAccess<Request> = {
  method: (req) => req.method,
  path: (req) => req.path,
  // Set when the middleware is mounted on a route (`app.post("/user", limit, handler)`).
  route: (req) => (req.route !== undefined ? `${req.baseUrl}${(req.route as { path: string }).path}` : undefined),
  remoteAddress: (req) => req.socket.remoteAddress,
  header: (req, name) => nodeAccess.header(req, name),
  frameworkTrust: (req) => expressTrust(req.app as TrustApp | undefined),
  frameworkIp: (req) => req.ip,
};

/** The part of an Express app read for its `trust proxy` setting. */
interface TrustApp {
  get(setting: "trust proxy"): unknown;
}

/** The app's `trust proxy` setting as ratekeeper reads it, by app and value (a setting changed later is seen). */
const trustCache = new WeakMap<object, { value: unknown; trust: FrameworkTrust | undefined }>();

/**
 * Express's `trust proxy` (https://expressjs.com/en/guide/behind-proxies.html): `false` (the
 * default) trusts nobody; `true` every hop; a number the nearest N hops; addresses, CIDR ranges,
 * `loopback`/`linklocal`/`uniquelocal`, or a function, those proxies. `req.ip` applies it.
 */
function expressTrust(app: TrustApp | undefined): FrameworkTrust | undefined {
  if (app === undefined || typeof app.get !== "function") return undefined;
  const value = app.get("trust proxy");
  const cached = trustCache.get(app);
  if (cached !== undefined && cached.value === value) return cached.trust;
  const none = value === undefined || value === false || value === 0 || value === "" || (Array.isArray(value) && value.length === 0);
  const trust = none
    ? undefined
    : {
        setting: `app.set("trust proxy", ${typeof value === "function" ? "<function>" : JSON.stringify(value)})`,
        permissive: value === true,
      };
  trustCache.set(app, { value, trust });
  return trust;
}

/** Options of the Express middleware. */
export interface ExpressRateLimitOptions extends RateLimitOptions<Request> {
  /**
   * Sends the refusal yourself (429, 403 or 503). Headers and `Retry-After` are already set;
   * `result.problem` holds the default body.
   * @example handler: (req, res, next, result) => res.status(result.status).json({ error: "slow down" })
   */
  handler?: (req: Request, res: Response, next: NextFunction, result: RateLimitResult) => void | Promise<void>;
}

/** The middleware, with its framework-neutral core attached. */
export type ExpressRateLimit = RequestHandler & { readonly core: HttpRateLimiter<Request> };

/**
 * Creates Express middleware that limits requests.
 * @throws RateLimitConfigError naming every bad option
 * @example app.post("/user", rateLimit({ limiter, cost: { "GET /user": 1, "POST /user": 2 } }), handler)
 */
export function rateLimit(options: ExpressRateLimitOptions): ExpressRateLimit {
  const core = new HttpRateLimiter(options, expressAccess);
  const handler = options.handler;
  const apply = (result: RateLimitResult, req: Request, res: Response, next: NextFunction): void => {
    const refuse = handler === undefined ? undefined : (r: RateLimitResult) => handler(req, res, next, r);
    const go = applyNode(core, result, req, res, refuse);
    // With the memory store this is synchronous: next() runs in the same tick, as a plain middleware's would.
    if (go === true) next();
    else if (go !== false) go.then((ok) => (ok ? next() : undefined), next);
  };
  const middleware: RequestHandler = (req, res, next) => {
    const r = core.check(req);
    if (r instanceof Promise) r.then((x) => apply(x, req, res, next)).catch(next);
    else apply(r, req, res, next);
  };
  return Object.assign(middleware, { core });
}
