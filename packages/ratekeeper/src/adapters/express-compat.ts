import { createHash } from "node:crypto";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import { HttpRateLimiter, type RateLimitOptions, type RateLimitResult } from "../http/core.js";
import { expressAccess } from "./express-access.js";
import { applyNode, writeNode } from "./node.js";

/**
 * express-rate-limit's options (v7/v8), accepted by `ratekeeper/express`'s `rateLimit` with the
 * same meaning, as a mapping onto ratekeeper's middleware: not a second limiter. The decision is
 * ratekeeper's (`fixed-window` with `align: "first-request"`, which is what express-rate-limit's
 * MemoryStore does: each client's window opens at its first request); the headers, the 429 answer,
 * `req.rateLimit`, `resetKey` and `getKey` are written in express-rate-limit's formats.
 * docs/migrating-from-express-rate-limit.md has the table and the few differences.
 */
export interface ExpressRateLimitCompatOptions {
  /** Window length in ms. @default 60_000 */
  windowMs?: number;
  /** Requests per window per client, or a function of the request. @default 5 */
  limit?: number | ((req: Request, res: Response) => number | Promise<number>);
  /** Old name of `limit`. */
  max?: number | ((req: Request, res: Response) => number | Promise<number>);
  /** The 429's body (`res.send(message)`), or a function of the request. @default "Too many requests, please try again later." */
  message?: unknown;
  /** @default 429 */
  statusCode?: number;
  /** Sends the refusal. @default res.status(statusCode).send(message) */
  handler?: (req: Request, res: Response, next: NextFunction, options: ResolvedCompat) => unknown;
  /** The client's key. @default the client address (`req.ip`), IPv6 grouped by `ipv6Subnet` */
  keyGenerator?: (req: Request, res: Response) => string | Promise<string>;
  skip?: (req: Request, res: Response) => boolean | Promise<boolean>;
  skipSuccessfulRequests?: boolean;
  skipFailedRequests?: boolean;
  /** Must answer synchronously here. @default res.statusCode < 400 */
  requestWasSuccessful?: (req: Request, res: Response) => boolean;
  /** `true` is `"draft-6"`. @default false */
  standardHeaders?: boolean | "draft-6" | "draft-7" | "draft-8";
  /** X-RateLimit-Limit, -Remaining, -Reset. @default true */
  legacyHeaders?: boolean;
  /** The policy's name in draft-8 headers. @default "<limit>-in-<window>" ("100-in-15min") */
  identifier?: string | ((req: Request, res: Response) => string | Promise<string>);
  /** @default "rateLimit" */
  requestPropertyName?: string;
  /** `true`: a failing store lets requests through (ratekeeper's `failure: "open"`); `false`: 503 (`"closed"`). @default false */
  passOnStoreError?: boolean;
  /** express-rate-limit's validation switches; `trustProxy` and `xForwardedForHeader` map to ratekeeper's checks. */
  validate?: boolean | Record<string, boolean>;
  /** A ratekeeper store (`MemoryStore`, `RedisStore`). express-rate-limit's stores are not used. */
  store?: RateLimitOptions<Request>["store"];
  /** IPv6 clients are keyed by this prefix. @default 56 */
  ipv6Subnet?: number;
  /** ratekeeper's own options may be added (`trustedProxies`, `onError`, `onDecision`, ...). */
  trustedProxies?: readonly string[];
  onError?: RateLimitOptions<Request>["onError"];
  onDecision?: RateLimitOptions<Request>["onDecision"];
  onWarning?: RateLimitOptions<Request>["onWarning"];
  clock?: () => number;
}

/** What `req.rateLimit` holds, as in express-rate-limit. */
export interface RateLimitInfo {
  limit: number;
  used: number;
  remaining: number;
  resetTime: Date | undefined;
  key: string;
}

/** The options with their defaults, passed to `handler` as its fourth argument (as express-rate-limit does). */
export type ResolvedCompat = Required<
  Pick<ExpressRateLimitCompatOptions, "windowMs" | "message" | "statusCode" | "legacyHeaders" | "requestPropertyName">
> & {
  limit: NonNullable<ExpressRateLimitCompatOptions["limit"]>;
  standardHeaders: false | "draft-6" | "draft-7" | "draft-8";
};

/** The middleware with express-rate-limit's `resetKey` and `getKey`. */
export type ExpressRateLimitCompat = RequestHandler & {
  resetKey(key: string): Promise<void>;
  getKey(key: string): Promise<{ totalHits: number; resetTime: Date | undefined } | undefined>;
};

/** Options only express-rate-limit has: one of them (or no policy at all) selects this mapping. */
const ERL_ONLY = [
  "windowMs",
  "max",
  "message",
  "statusCode",
  "keyGenerator",
  "skipSuccessfulRequests",
  "skipFailedRequests",
  "requestWasSuccessful",
  "standardHeaders",
  "legacyHeaders",
  "identifier",
  "requestPropertyName",
  "passOnStoreError",
];
const KNOWN = new Set([
  ...ERL_ONLY,
  "limit",
  "handler",
  "skip",
  "validate",
  "store",
  "ipv6Subnet",
  "trustedProxies",
  "onError",
  "onDecision",
  "onWarning",
  "clock",
]);

/** Whether options are express-rate-limit's: one of its own names, or a top-level `limit`, or no policy at all. */
export function isExpressRateLimitOptions(o: object): o is ExpressRateLimitCompatOptions {
  const r = o as Record<string, unknown>;
  if (ERL_ONLY.some((k) => k in r) || "limit" in r) return true;
  return r.limiter === undefined && r.limits === undefined && r.concurrency === undefined;
}

/** ratekeeper's validate option from express-rate-limit's. */
function mapValidate(v: ExpressRateLimitCompatOptions["validate"]): RateLimitOptions<Request>["validate"] {
  if (v === undefined || typeof v === "boolean") return v;
  const def = v.default !== false;
  return { forwardedHeader: v.xForwardedForHeader ?? v.forwardedHeader ?? def, trustProxy: v.trustProxy ?? def };
}

/** express-rate-limit's default identifier: `100-in-15min`. */
function identifierOf(limit: number, windowMs: number): string {
  const s = windowMs / 1000;
  const m = s / 60;
  const h = m / 60;
  const d = h / 24;
  const duration = s < 60 ? `${s}sec` : m < 60 ? `${m}min` : h < 24 ? `${h}hr${h > 1 ? "s" : ""}` : `${d}day${d > 1 ? "s" : ""}`;
  return `${limit}-in-${duration}`;
}

/** Checks what ratekeeper's options do not (the rest is checked by the core), each naming the option and what to write. */
function check(o: ExpressRateLimitCompatOptions): void {
  const problems: string[] = [];
  for (const k of Object.keys(o)) if (!KNOWN.has(k)) problems.push(`${k}: unknown option (express-rate-limit's or ratekeeper's)`);
  const w = o.windowMs;
  if (w !== undefined && (typeof w !== "number" || !Number.isSafeInteger(w) || w < 1)) {
    problems.push(`windowMs: must be a whole number of milliseconds >= 1 (got ${String(w)})`);
  }
  const l = o.limit ?? o.max;
  if (l !== undefined && typeof l !== "function" && (typeof l !== "number" || !Number.isSafeInteger(l) || l < 1)) {
    problems.push(
      `limit: must be a whole number >= 1 or a function returning one (got ${String(l)}); to block every request use skip or a deny list`,
    );
  }
  const sh = o.standardHeaders;
  if (sh !== undefined && typeof sh !== "boolean" && sh !== "draft-6" && sh !== "draft-7" && sh !== "draft-8") {
    problems.push(`standardHeaders: must be true, false, "draft-6", "draft-7" or "draft-8" (got ${String(sh)})`);
  }
  if (o.skipFailedRequests === true && o.skipSuccessfulRequests === true) {
    problems.push(
      "skipFailedRequests and skipSuccessfulRequests: with both, no request would count; use skip: () => true to turn the limit off",
    );
  }
  if (o.store !== undefined && typeof (o.store as { increment?: unknown }).increment === "function") {
    problems.push(
      "store: an express-rate-limit store; give a ratekeeper store instead: new MemoryStore() from 'ratekeeper' or new RedisStore({ client }) from 'ratekeeper/redis'",
    );
  }
  if (problems.length > 0) throw new TypeError(`ratekeeper/express (express-rate-limit options): ${problems.join("; ")}`);
}

/**
 * express-rate-limit's `rateLimit(options)` on ratekeeper's middleware.
 * @example app.use(rateLimit({ windowMs: 15 * 60 * 1000, limit: 100, standardHeaders: "draft-8", legacyHeaders: false }))
 */
export function erlRateLimit(o: ExpressRateLimitCompatOptions): ExpressRateLimitCompat {
  check(o);
  const config = resolveCompat(o);
  const cores = new Map<number, HttpRateLimiter<Request>>();
  const coreFor = (limit: number): HttpRateLimiter<Request> => {
    let core = cores.get(limit);
    if (core === undefined) {
      core = new HttpRateLimiter(coreOptions(o, limit, config.windowMs), expressAccess);
      cores.set(limit, core);
    }
    return core;
  };
  // A fixed limit: build (and check) the core now, as the plain middleware does.
  if (typeof config.limit === "number") coreFor(config.limit);
  const handler = o.handler ?? defaultHandler;
  const run = async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const limit = typeof config.limit === "function" ? await config.limit(req, res) : config.limit;
    const core = coreFor(limit);
    const result = await core.check(req);
    const d = result.decision;
    if (d === undefined || result.key === undefined || (!result.pass && result.status !== 429)) {
      // Skipped or allow-listed (passed on), or a deny list / store failure answer of ratekeeper's own.
      finish(core, result, req, res, next);
      return;
    }
    const nowMs = (o.clock ?? Date.now)();
    const info = infoOf(d, limit, result.key, nowMs);
    (req as unknown as Record<string, unknown>)[config.requestPropertyName] = info;
    await writeHeaders(res, info, config, o, req, nowMs);
    if (!result.pass) {
      if (config.legacyHeaders || config.standardHeaders !== false)
        res.setHeader("Retry-After", String(resetSeconds(info, nowMs, config.windowMs)));
      await handler(req, res, next, config);
      return;
    }
    finish(core, result, req, res, next);
  };
  const middleware: RequestHandler = (req, res, next) => {
    run(req, res, next).catch(next);
  };
  return Object.assign(middleware, {
    async resetKey(key: string): Promise<void> {
      for (const core of cores.values()) await core.limiter?.reset(key);
    },
    async getKey(key: string) {
      for (const [limit, core] of cores) {
        const d = await core.limiter?.peek(key);
        if (d !== undefined && d.remaining < limit) {
          return { totalHits: limit - d.remaining, resetTime: new Date((o.clock ?? Date.now)() + d.resetAfterMs) };
        }
      }
      return undefined;
    },
  });
}

/** The options with express-rate-limit's defaults: what its handler receives as `options`. */
function resolveCompat(o: ExpressRateLimitCompatOptions): ResolvedCompat {
  return {
    windowMs: o.windowMs ?? 60_000,
    limit: o.limit ?? o.max ?? 5,
    message: o.message ?? "Too many requests, please try again later.",
    statusCode: o.statusCode ?? 429,
    legacyHeaders: o.legacyHeaders ?? true,
    // `true` means draft-6, as in express-rate-limit.
    standardHeaders: o.standardHeaders === true ? "draft-6" : (o.standardHeaders ?? false),
    requestPropertyName: o.requestPropertyName ?? "rateLimit",
  };
}

/** ratekeeper's middleware options for one limit value. */
function coreOptions(o: ExpressRateLimitCompatOptions, limit: number, windowMs: number): RateLimitOptions<Request> {
  const { keyGenerator, skip, requestWasSuccessful } = o;
  return {
    limits: [{ algorithm: "fixed-window", align: "first-request", limit, window: windowMs, name: identifierOf(limit, windowMs) }],
    store: o.store,
    clock: o.clock,
    key: keyGenerator === undefined ? "ip" : (req) => keyGenerator(req, req.res as Response),
    skip: skip === undefined ? undefined : (req) => skip(req, req.res as Response),
    countOnly: o.skipFailedRequests === true ? "successful" : o.skipSuccessfulRequests === true ? "failed" : undefined,
    isFailed: requestWasSuccessful === undefined ? undefined : (_status, req) => !requestWasSuccessful(req, req.res as Response),
    headers: false,
    failure: o.passOnStoreError === true ? "open" : "closed",
    validate: mapValidate(o.validate),
    ipv6Subnet: o.ipv6Subnet ?? 56,
    trustedProxies: o.trustedProxies,
    onError: o.onError,
    onDecision: o.onDecision,
    onWarning: o.onWarning,
  };
}

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

/** `req.rateLimit`: used counts this request (a denied one included, as in express-rate-limit). */
function infoOf(d: NonNullable<RateLimitResult["decision"]>, limit: number, key: string, nowMs: number): RateLimitInfo {
  const used = d.allowed ? limit - d.remaining : limit + 1;
  return { limit, used, remaining: d.allowed ? d.remaining : 0, resetTime: new Date(nowMs + d.resetAfterMs), key };
}

function resetSeconds(info: RateLimitInfo, nowMs: number, windowMs: number): number {
  return info.resetTime === undefined ? Math.ceil(windowMs / 1000) : Math.max(0, Math.ceil((info.resetTime.getTime() - nowMs) / 1000));
}

/** express-rate-limit's headers, in its formats. */
async function writeHeaders(
  res: Response,
  info: RateLimitInfo,
  config: ResolvedCompat,
  o: ExpressRateLimitCompatOptions,
  req: Request,
  nowMs: number,
): Promise<void> {
  if (res.headersSent) return;
  const windowS = Math.ceil(config.windowMs / 1000);
  const reset = resetSeconds(info, nowMs, config.windowMs);
  if (config.legacyHeaders) {
    res.setHeader("X-RateLimit-Limit", String(info.limit));
    res.setHeader("X-RateLimit-Remaining", String(info.remaining));
    if (info.resetTime !== undefined) {
      res.setHeader("Date", new Date(nowMs).toUTCString());
      res.setHeader("X-RateLimit-Reset", String(Math.ceil(info.resetTime.getTime() / 1000)));
    }
  }
  switch (config.standardHeaders) {
    case false:
      break;
    case "draft-6":
      res.setHeader("RateLimit-Policy", `${info.limit};w=${windowS}`);
      res.setHeader("RateLimit-Limit", String(info.limit));
      res.setHeader("RateLimit-Remaining", String(info.remaining));
      res.setHeader("RateLimit-Reset", String(reset));
      break;
    case "draft-7":
      res.setHeader("RateLimit-Policy", `${info.limit};w=${windowS}`);
      res.setHeader("RateLimit", `limit=${info.limit}, remaining=${info.remaining}, reset=${reset}`);
      break;
    case "draft-8": {
      const id = o.identifier;
      const name = typeof id === "function" ? await id(req, res) : (id ?? identifierOf(info.limit, config.windowMs));
      // The partition key: 12 hex digits of the key's SHA-256, base64-encoded (as express-rate-limit does).
      const pk = Buffer.from(createHash("sha256").update(info.key).digest("hex").slice(0, 12)).toString("base64");
      res.append("RateLimit", `"${name}"; r=${info.remaining}; t=${reset}`);
      res.append("RateLimit-Policy", `"${name}"; q=${info.limit}; w=${windowS}; pk=:${pk}:`);
      break;
    }
  }
}

/** express-rate-limit's default handler: the status, then the message (a function's answer, awaited). */
async function defaultHandler(req: Request, res: Response, _next: NextFunction, options: ResolvedCompat): Promise<void> {
  res.status(options.statusCode);
  const m = options.message;
  const message: unknown = typeof m === "function" ? await (m as (req: Request, res: Response) => unknown)(req, res) : m;
  if (!res.writableEnded) res.send(message);
}
