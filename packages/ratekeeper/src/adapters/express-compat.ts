import type { NextFunction, Request, RequestHandler, Response } from "express";
import { HttpRateLimiter, type RateLimitOptions, type RateLimitResult } from "../http/core.js";
import { ipv6Prefix } from "../http/ip.js";
import { COUNTER_OWNER } from "../http/counter-claims.js";
import { expressAccess } from "./express-access.js";
import { isIPv6 } from "node:net";
import { infoOf, ipKeyGenerator, resetSeconds, writeHeaders } from "./express-compat-headers.js";
import {
  check,
  consoleLogger,
  describeValue,
  identifierOf,
  isSeconds,
  isSubnet,
  mapValidate,
  resolveCompat,
  type ExpressRateLimitCompatOptions,
  type RateLimitInfo,
  type ResolvedCompat,
} from "./express-compat-options.js";
import { applyNode, writeNode } from "./node.js";

export {
  isExpressRateLimitOptions,
  type ExpressRateLimitCompatOptions,
  type RateLimitInfo,
  type ResolvedCompat,
} from "./express-compat-options.js";
export { ipKeyGenerator } from "./express-compat-headers.js";

/** The middleware with express-rate-limit's `resetKey` and `getKey`. */
export type ExpressRateLimitCompat = RequestHandler & {
  resetKey(key: string): Promise<void>;
  getKey(key: string): Promise<{ totalHits: number; resetTime: Date | undefined } | undefined>;
};

/**
 * express-rate-limit's `rateLimit(options)` on ratekeeper's middleware. As there, `skip`, the key
 * and the limit are asked first, and an error thrown by one of them goes to Express's error
 * handler (`passOnStoreError` is about the store only).
 * @example app.use(rateLimit({ windowMs: 15 * 60 * 1000, limit: 100, standardHeaders: "draft-8", legacyHeaders: false }))
 */
export function erlRateLimit(o: ExpressRateLimitCompatOptions): ExpressRateLimitCompat {
  check(o);
  const config = resolveCompat(o, { keyGenerator: (req, res) => defaultKey(o, req, res), handler: defaultHandler });
  // Keys worked out here (a keyGenerator, or the address grouped by an ipv6Subnet function), read back by the core.
  const keys = new WeakMap<Request, string>();
  const { coreFor, limits } = limitersFor(o, config.windowMs, keys);
  // A fixed limit: build (and check) the core now, as the plain middleware does.
  if (typeof config.limit === "number") coreFor(config.limit);
  const handler = config.handler;
  const clock = o.clock ?? Date.now;
  const refuse = async (req: Request, res: Response, next: NextFunction, info: RateLimitInfo, nowMs: number): Promise<void> => {
    (req as unknown as Record<string, unknown>)[config.requestPropertyName] = info;
    await writeHeaders(res, info, config, o, req, nowMs);
    if ((config.legacyHeaders || config.standardHeaders !== false) && !res.headersSent) {
      res.setHeader("Retry-After", String(await retryAfterOf(o, req, res, () => resetSeconds(info, nowMs, config.windowMs))));
    }
    await handler(req, res, next, config);
  };
  const seenBefore = doubleCountGuard(o, config);
  const run = async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    if (seenBefore(req) || (o.skip !== undefined && (await o.skip(req, res)))) {
      next();
      return;
    }
    // express-rate-limit's order: the key, then the limit (which may read what keyGenerator found).
    const generated = o.keyGenerator === undefined ? undefined : await generatedKey(o.keyGenerator, req, res);
    const limit = await limitOf(config, req, res);
    const core = coreFor(limit);
    const key = generated ?? (await subnetKey(o, core, req, res));
    if (key !== undefined) keys.set(req, key);
    if (limit === 0) {
      // express-rate-limit 7+: a limit of 0 refuses every request; nothing is counted.
      const nowMs = clock();
      const info = { limit: 0, used: 1, remaining: 0, resetTime: new Date(nowMs + config.windowMs), key: key ?? core.clientIp(req) ?? "" };
      await refuse(req, res, next, info, nowMs);
      return;
    }
    const result = await core.check(req);
    const d = result.decision;
    if (d === undefined || result.key === undefined || (!result.pass && result.status !== 429)) {
      // Passed on, or a store failure / missing address answered by ratekeeper itself.
      finish(core, result, req, res, next);
      return;
    }
    const nowMs = clock();
    const info = infoOf(d, limit, result.key, nowMs);
    if (!result.pass) {
      await refuse(req, res, next, info, nowMs);
      return;
    }
    (req as unknown as Record<string, unknown>)[config.requestPropertyName] = info;
    await writeHeaders(res, info, config, o, req, nowMs);
    finish(core, result, req, res, next);
  };
  const middleware: RequestHandler = (req, res, next) => {
    run(req, res, next).catch(next);
  };
  return Object.assign(middleware, keyMethods(limits, coreFor, clock));
}

/**
 * The limiter of each limit value, made when first needed. At most {@link MAX_LIMITERS} are kept
 * (the least recently used is let go); `limits()` names those kept and those met lately.
 */
function limitersFor(o: ExpressRateLimitCompatOptions, windowMs: number, keys: WeakMap<Request, string>) {
  const cores = new Map<number, HttpRateLimiter<Request>>();
  // Limit values met lately, for resetKey and getKey (their limiters may have been let go).
  const seen = new Set<number>();
  let store = o.store;
  const owner = {};
  const coreFor = (limit: number): HttpRateLimiter<Request> => {
    let core = cores.get(limit);
    if (core !== undefined) {
      // Most recently used last, so the oldest is let go first.
      if (cores.size > 1) {
        cores.delete(limit);
        cores.set(limit, core);
      }
      return core;
    }
    // All one rateLimit() to the user: its limiters claim their counters together (RK_STORE_REUSE).
    const options = { ...coreOptions(o, Math.max(limit, 1), windowMs, keys, store), [COUNTER_OWNER]: owner };
    core = new HttpRateLimiter(options, expressAccess);
    // Every limit value's limiter uses one store: a limiter made again for a value finds its counters there.
    store ??= core.limiter?.store;
    cores.set(limit, core);
    if (cores.size > MAX_LIMITERS) cores.delete(cores.keys().next().value as number);
    seen.delete(limit);
    seen.add(limit);
    if (seen.size > MAX_SEEN) seen.delete(seen.values().next().value as number);
    return core;
  };
  return { coreFor, limits: (): ReadonlySet<number> => new Set([...cores.keys(), ...seen]) };
}

/** express-rate-limit's `resetKey` and `getKey`, over the counters of the limit values held or met lately. */
function keyMethods(limits: () => ReadonlySet<number>, coreFor: (limit: number) => HttpRateLimiter<Request>, clock: () => number) {
  return {
    async resetKey(key: string): Promise<void> {
      for (const limit of limits()) if (limit > 0) await coreFor(limit).limiter?.reset(key);
    },
    async getKey(key: string): Promise<{ totalHits: number; resetTime: Date | undefined } | undefined> {
      for (const limit of limits()) {
        if (limit === 0) continue;
        // peek answers for one more request: its `remaining` is after that request.
        const d = await coreFor(limit).limiter?.peek(key);
        const used = d === undefined ? 0 : d.allowed ? limit - d.remaining - 1 : limit;
        if (d !== undefined && used > 0) return { totalHits: used, resetTime: new Date(clock() + d.resetAfterMs) };
      }
      return undefined;
    },
  };
}

/** A refusal's `Retry-After` seconds: the `retryAfter` option (or its function's answer), else `otherwise()`. */
async function retryAfterOf(o: ExpressRateLimitCompatOptions, req: Request, res: Response, otherwise: () => number): Promise<number> {
  const ra = o.retryAfter;
  if (ra === undefined) return otherwise();
  const s: unknown = typeof ra === "function" ? await ra(req, res) : ra;
  if (!isSeconds(s))
    throw new TypeError(`retryAfter: the function returned ${describeValue(s)}; it must return a whole number of seconds >= 0`);
  return s;
}

/**
 * Whether this middleware met the request already (mounted twice on its way, `app.use(limiter)`
 * and `router.use(limiter)`): then it is passed on uncounted, so the limit stays the one written;
 * express-rate-limit counts it twice. Told once as `RK_DOUBLE_COUNT` (to `onWarning`, else
 * `logger.warn`, else the console) unless `validate` is false or `validate.singleCount` is.
 */
function doubleCountGuard(o: ExpressRateLimitCompatOptions, config: ResolvedCompat): (req: Request) => boolean {
  const met = new WeakSet<Request>();
  const v = config.validate;
  let warn = v !== false && !(typeof v === "object" && v.singleCount === false);
  return (req) => {
    if (!met.has(req)) {
      met.add(req);
      return false;
    }
    if (warn) {
      warn = false;
      const message =
        `ratekeeper [RK_DOUBLE_COUNT]: this rate limiter met ${req.method} ${req.path} twice (is it mounted twice?); ` +
        "it counted the request once. See ratekeeper's docs/middleware.md#validations";
      try {
        if (o.onWarning !== undefined) o.onWarning({ code: "RK_DOUBLE_COUNT", message });
        else if (o.logger !== undefined) o.logger.warn(message);
        else console.warn(message);
      } catch {
        // A throwing warning handler must not take the request down.
      }
    }
    return true;
  };
}

/** The request's limit: the option, or the function's answer, which must be a count. */
async function limitOf(config: ResolvedCompat, req: Request, res: Response): Promise<number> {
  if (typeof config.limit !== "function") return config.limit;
  const limit: unknown = await config.limit(req, res);
  if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) {
    throw new TypeError(
      `limit: the function returned ${describeValue(limit)}; it must return a whole number >= 0 (0 refuses every request)`,
    );
  }
  return limit;
}

/**
 * A keyGenerator's key. It must be a non-empty string (or a number, taken as its text): express-rate-limit
 * would put every client given `undefined` into one bucket, where one of them could use up
 * everyone's allowance.
 */
async function generatedKey(
  keyGenerator: NonNullable<ExpressRateLimitCompatOptions["keyGenerator"]>,
  req: Request,
  res: Response,
): Promise<string> {
  const key: unknown = await keyGenerator(req, res);
  // An empty key is no key either (ratekeeper would key it as "-", one bucket for all such requests).
  if (typeof key === "string" && key.length > 0) return key;
  if (typeof key === "number" && Number.isFinite(key)) return String(key);
  throw new TypeError(
    `keyGenerator: returned ${describeValue(key)} for ${req.method} ${req.path}; it must return a string (the client's key). ` +
      "Requests without a key of their own would share one allowance: fall back to the address, e.g. (req) => req.user?.id ?? ipKeyGenerator(req.ip)",
  );
}

/** With an ipv6Subnet function, the address grouped by its answer; otherwise undefined (the core's own "ip" key). */
async function subnetKey(
  o: ExpressRateLimitCompatOptions,
  core: HttpRateLimiter<Request>,
  req: Request,
  res: Response,
): Promise<string | undefined> {
  const subnetOf = o.ipv6Subnet;
  if (typeof subnetOf !== "function") return undefined;
  // The core keys by the whole address here (see coreOptions); the function picks the prefix.
  const ip = core.clientIp(req);
  if (ip === undefined) throw new Error(`ipv6Subnet: ${req.method} ${req.path} has no client address to group`);
  if (!ip.includes(":")) return ip;
  const bits: unknown = await subnetOf(req, res);
  if (!isSubnet(bits))
    throw new TypeError(`ipv6Subnet: the function returned ${describeValue(bits)}; it must return a whole number from 1 to 128`);
  return ipv6Prefix(ip, bits);
}

/** ratekeeper's middleware options for one limit value. */
function coreOptions(
  o: ExpressRateLimitCompatOptions,
  limit: number,
  windowMs: number,
  keys: WeakMap<Request, string>,
  store: RateLimitOptions<Request>["store"],
): RateLimitOptions<Request> {
  const { requestWasSuccessful, logger } = o;
  const own = o.keyGenerator !== undefined || typeof o.ipv6Subnet === "function";
  return {
    limits: [{ algorithm: "fixed-window", align: "first-request", limit, window: windowMs, name: identifierOf(limit, windowMs) }],
    store,
    clock: o.clock,
    key: own ? (req) => keys.get(req) : "ip",
    countOnly: o.skipFailedRequests === true ? "successful" : o.skipSuccessfulRequests === true ? "failed" : undefined,
    isFailed:
      requestWasSuccessful === undefined
        ? undefined
        : (_status, req) => {
            const ok = requestWasSuccessful(req, req.res as Response);
            return ok instanceof Promise ? ok.then((x) => !x) : !ok;
          },
    headers: false,
    failure: o.passOnStoreError === true ? "open" : "closed",
    validate: mapValidate(o.validate),
    ipv6Subnet: typeof o.ipv6Subnet === "number" ? o.ipv6Subnet : o.ipv6Subnet === undefined ? 56 : 128,
    trustedProxies: o.trustedProxies,
    noAddress: o.noAddress,
    // Store errors are told as express-rate-limit tells them: to its logger, by default the console.
    onError: o.onError ?? ((e) => (logger ?? consoleLogger).error(e, "ratekeeper/express: error from the store or a callback")),
    onDecision: o.onDecision,
    onWarning: o.onWarning ?? (logger === undefined ? undefined : (w) => logger.warn(w)),
  };
}

/**
 * Limiters kept (one per limit value; a limit function may answer many values, a quota per user):
 * past this, the least recently used is let go. Its counters stay in the store.
 */
const MAX_LIMITERS = 256;
/** Limit values resetKey and getKey look at: the latest this many. */
const MAX_SEEN = 4096;

/** Passes an admitted (or skipped) request on, or sends ratekeeper's own refusal (403, 503). */
function finish(core: HttpRateLimiter<Request>, result: RateLimitResult, req: Request, res: Response, next: NextFunction): void {
  if (!result.pass) {
    writeNode(result, res);
    return;
  }
  const go = applyNode(core, result, req, res, undefined);
  if (go === true) next();
  else if (go !== false) go.then((ok) => (ok ? next() : undefined), next);
}

/** express-rate-limit's default keyGenerator, for handlers that call `options.keyGenerator` (the middleware itself asks the core). */
async function defaultKey(o: ExpressRateLimitCompatOptions, req: Request, res: Response): Promise<string> {
  const ip = req.ip ?? "";
  const subnet = typeof o.ipv6Subnet === "function" ? (isIPv6(ip) ? await o.ipv6Subnet(req, res) : 56) : (o.ipv6Subnet ?? 56);
  return ipKeyGenerator(ip, subnet);
}

/** express-rate-limit's default handler: the status, then the message (a function's answer, awaited). */
async function defaultHandler(req: Request, res: Response, _next: NextFunction, options: ResolvedCompat): Promise<void> {
  res.status(options.statusCode);
  const m = options.message;
  const message: unknown = typeof m === "function" ? await (m as (req: Request, res: Response) => unknown)(req, res) : m;
  if (!res.writableEnded) res.send(message);
}
