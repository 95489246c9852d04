import type { Request } from "express";
import type { FrameworkTrust, RequestAccess } from "../http/core.js";
import { nodeAccess, rawForwarded } from "./node.js";

/** How the core reads an Express request (shared by the middleware and its express-rate-limit mapping). */
export const expressAccess: RequestAccess<Request> = {
  method: (req) => req.method,
  path: (req) => routedPath(req.app as TrustApp | undefined, req.path),
  // Set when the middleware is mounted on a route (`app.post("/user", limit, handler)`); the mount
  // path is the request's own spelling of it, so it is folded like the path.
  route: (req) =>
    req.route !== undefined
      ? `${routedPath(req.app as TrustApp | undefined, req.baseUrl)}${(req.route as { path: string }).path}`
      : undefined,
  remoteAddress: (req) => req.socket.remoteAddress,
  header: (req, name) => nodeAccess.header(req, name),
  frameworkTrust: (req) => expressTrust(req.app as TrustApp | undefined),
  frameworkIp: (req) => req.ip,
  forwarded: (req) => rawForwarded(req),
};

/** The part of an Express app read for its `trust proxy` and routing settings. */
interface TrustApp {
  get(setting: "trust proxy" | "case sensitive routing" | "strict routing"): unknown;
}

/**
 * A path as the app's router matches it: Express routes `/login`, `/LOGIN` and `/login/` to one
 * handler unless "case sensitive routing" / "strict routing" are set, so keys and cost tables
 * see one spelling (lower case; no trailing slash) and a client cannot multiply its allowance or
 * skip a price by respelling the path.
 */
function routedPath(app: TrustApp | undefined, path: string): string {
  if (app === undefined || typeof app.get !== "function") return path;
  let p = app.get("case sensitive routing") ? path : path.toLowerCase();
  if (!app.get("strict routing") && p.length > 1 && p.endsWith("/")) p = p.slice(0, -1);
  return p;
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
