import type { NextFunction, Request, RequestHandler, Response } from "express";
import { HttpRateLimiter, type RateLimitOptions, type RateLimitResult } from "../http/core.js";
import {
  erlRateLimit,
  isExpressRateLimitOptions,
  type ExpressRateLimitCompatOptions,
  type ExpressRateLimitCompat,
} from "./express-compat.js";
import { expressAccess } from "./express-access.js";
import { applyNode } from "./node.js";
import { describeNonPlain } from "../http/plain-object.js";

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
 *
 * It also takes express-rate-limit's options with their meaning (`windowMs`, `limit`, `message`,
 * `standardHeaders`, ...; see express-compat.ts and docs/migrating-from-express-rate-limit.md).
 */

/** Options of the Express middleware. */
export interface ExpressRateLimitOptions extends RateLimitOptions<Request> {
  /**
   * Sends the refusal yourself (429, 403, 500 or 503). Headers and `Retry-After` are already set;
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
export function rateLimit(options: ExpressRateLimitOptions): ExpressRateLimit;
/** express-rate-limit's options, with their meaning there (a mapping onto this middleware). */
export function rateLimit(options?: ExpressRateLimitCompatOptions): ExpressRateLimitCompat;
export function rateLimit(
  given?: ExpressRateLimitOptions | ExpressRateLimitCompatOptions | null,
): ExpressRateLimit | ExpressRateLimitCompat {
  // null too is "no options" (express-rate-limit's defaults), as express-rate-limit takes it.
  const options = given ?? {};
  if (typeof options !== "object") throw new TypeError(`rateLimit: options must be an object (got ${typeof options})`);
  // A Map, Date or class instance would read as {} (every default): refused, naming what it is.
  const kind = describeNonPlain(options);
  if (kind !== undefined) throw new TypeError(`rateLimit: options must be an object literal (got ${kind})`);
  if (isExpressRateLimitOptions(options)) return erlRateLimit(options);
  return ratekeeperLimit(options);
}

/** The middleware with ratekeeper's own options. */
function ratekeeperLimit(options: ExpressRateLimitOptions): ExpressRateLimit {
  const core = new HttpRateLimiter(options, expressAccess);
  const handler = options.handler;
  const apply = (result: RateLimitResult, req: Request, res: Response, next: NextFunction): void => {
    // Bound to the request only for a refusal: an admitted request costs no closure.
    const refuse = handler === undefined || result.pass ? undefined : (r: RateLimitResult) => handler(req, res, next, r);
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

export type { ExpressRateLimitCompatOptions, ExpressRateLimitCompat, RateLimitInfo } from "./express-compat.js";
export { ipKeyGenerator } from "./express-compat.js";
