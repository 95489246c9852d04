import type { IncomingMessage, ServerResponse } from "node:http";
import type { Rules } from "../config/rules.js";
import { PageRequestError } from "../overrides/rows.js";
import { overrideWarnings } from "./override-warnings.js";
import { OverrideConflictError, type OverrideStore } from "../overrides/types.js";
import { CheckError, StoreFailure, type CheckInput, type CheckResult } from "../service/types.js";
import { errorIdField, HttpError, methodNotAllowed, sendError, TokenCheck } from "../http-io.js";
import {
  ADMIN_PREFIX,
  blockKey,
  createOverride,
  deleteOverride,
  listOverrides,
  needStore,
  peekKey,
  readOverride,
  replaceOverride,
  resetKey,
  unblockKey,
  type Admin,
  type AdminRoute,
} from "./admin-routes.js";

export { ADMIN_PREFIX };

/** What the admin API needs from the decision service to peek at and reset a key's counters. */
export interface AdminLimiters {
  /** The decision a cost-1 check would get now, changing nothing. */
  peek(input: CheckInput): Promise<CheckResult>;
  /** Forgets the counters under the policy in force for the key; resolves the state keys reset. */
  reset(input: CheckInput): Promise<string[]>;
}

/**
 * Everything {@link createAdminHandler} works with. The HTTP transport (transport/http.ts)
 * builds it: `overrides`, `limiters` and `logger`; it has already checked the bearer token
 * when it leaves `token` out. Embedders that mount the handler themselves pass `token`.
 */
export interface AdminContext {
  /** The configuration store (`--overrides URL`); undefined: the override routes answer 404. */
  readonly overrides?: unknown;
  /** Peek and reset (the decision service); undefined: those routes answer 404. */
  readonly limiters?: AdminLimiters | undefined;
  /** For the audit log: every change is logged with its action, domain and key. */
  readonly logger?: { info(obj: object, msg: string): void; warn?(obj: object, msg: string): void } | undefined;
  /**
   * The bearer token callers must send (`Authorization: Bearer <token>`), checked here in
   * constant time. Present but empty: the admin API is off (404). Absent: the caller (the HTTP
   * transport) authenticated the request before handing it over.
   */
  readonly token?: string | undefined;
  /**
   * Awaited after each write, so the next check through this instance sees the change. The
   * store's own change feed already does this for the cache it feeds; pass it when mounting
   * the handler next to a cache that follows another store object.
   */
  readonly cache?: { refresh(): Promise<void> } | undefined;
  /** Wall clock for `ttl` and for what counts as expired, ms since the epoch. @default Date.now */
  readonly clock?: (() => number) | undefined;
  /** Largest request body, in bytes; larger gets 413. @default 1048576 */
  readonly maxBodyBytes?: number | undefined;
  /** The rules in force, to warn the writer of an override that admits less than a rule of its domain costs; undefined: no warnings. */
  readonly rules?: (() => Rules) | undefined;
}

/** Answers an admin request; resolves true when it handled it (false: not an admin route). */
export type AdminHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/** One change made through the admin API, for the audit log. */
export interface AdminAuditEntry {
  readonly action: "create" | "replace" | "delete" | "block" | "unblock" | "reset";
  readonly domain: string;
  readonly key: string;
}

/**
 * The admin API, mounted by the HTTP transport under `/v1/admin/`. Returns a handler that
 * answers and resolves `true` for admin routes, and resolves `false` (touching nothing) for
 * any other URL. Every route needs `Authorization: Bearer <token>`, compared in constant time
 * (`TokenCheck`, transport/http-io.ts). Errors have the service's one body,
 * `{"error": code, "message": ..., "issues"?: [...]}`.
 *
 * Routes (`{key}` percent-encoded, so keys may contain `/`):
 * - `GET    /v1/admin/overrides?domain=&prefix=&limit=&cursor=&expired=true`: a page, with `nextCursor`
 * - `POST   /v1/admin/overrides`: create (409 when a live one exists)
 * - `GET    /v1/admin/overrides/{domain}/{key}`: read
 * - `PUT    /v1/admin/overrides/{domain}/{key}`: create (201) or replace (200)
 * - `DELETE /v1/admin/overrides/{domain}/{key}`: delete (204)
 * - `GET    /v1/admin/keys/{domain}/{key}`: peek at the key's decision
 * - `POST   /v1/admin/keys/{domain}/{key}/reset`: forget its counters
 * - `POST   /v1/admin/keys/{domain}/{key}/block`: `{ttl?|expiresAtMs?, note?}`: an override with policy "blocked"
 * - `POST   /v1/admin/keys/{domain}/{key}/unblock`: removes that block
 * @example
 * const admin = createAdminHandler({ token: process.env.RATEKEEPER_ADMIN_TOKEN, store, cache, keys });
 * http.createServer(async (req, res) => { if (!(await admin(req, res))) { res.statusCode = 404; res.end(); } });
 */
export function createAdminHandler(ctx: AdminContext): AdminHandler {
  // Absent token: the transport authenticated. Present but empty: the admin API is off.
  const authInTransport = ctx.token === undefined;
  const expected = ctx.token ? new TokenCheck(ctx.token) : undefined;
  const admin: Admin = {
    store: isOverrideStore(ctx.overrides) ? guarded(ctx.overrides) : undefined,
    limiters: ctx.limiters,
    clock: ctx.clock ?? Date.now,
    maxBodyBytes: ctx.maxBodyBytes ?? 1024 * 1024,
    warnings: (o) => (ctx.rules ? overrideWarnings(ctx.rules(), o) : []),
    audit: (entry) => ctx.logger?.info({ admin: entry }, "admin change"),
    async refreshCache(change) {
      // The write is durable already (its answer stands); a cache that cannot catch up now does
      // on its next signal or resync. Until then this instance decides without the change: said
      // in the log, so an operator who just blocked a client knows why it still gets through here.
      await ctx.cache
        ?.refresh()
        .catch((err: unknown) =>
          ctx.logger?.warn?.(
            { admin: change, err },
            "admin change stored but not yet applied by this instance: its override cache could not read the change feed; it applies the change on its next sync",
          ),
        );
    },
  };

  return async function adminHandler(req, res) {
    const target = req.url ?? "/";
    const url = new URL(target, "http://admin.invalid");
    // The path as sent, not url.pathname: the URL parser resolves "." and ".." segments, and
    // "%2E%2E" as "..", so the key ".." (or a domain ".") could not be addressed at all.
    const q = target.indexOf("?");
    const path = q === -1 ? target : target.slice(0, q);
    if (!path.startsWith(ADMIN_PREFIX)) return false;
    try {
      if (!authInTransport && !expected) throw new HttpError("not_found", "the admin API is off (no admin token is configured)");
      if (expected && !expected.matches(req.headers.authorization)) throw unauthorized();
      const { methods, domain, key } = match(admin, url, path);
      const method = req.method ?? "GET";
      const route = Object.hasOwn(methods, method) ? methods[method] : undefined;
      if (!route) throw methodNotAllowed(Object.keys(methods).join(", "));
      await route({ admin, req, res, url, domain, key });
    } catch (e) {
      if (!(e instanceof HttpError) && !(e instanceof CheckError))
        ctx.logger?.warn?.({ err: e, url: req.url, ...errorIdField(e) }, "admin request failed");
      sendError(req, res, e);
    }
    return true;
  };
}

/** The routes of one path shape, by method; a method not listed answers 405 with this list. */
type Methods = Readonly<Record<string, AdminRoute>>;

/** The route table: each path shape under {@link ADMIN_PREFIX} and what each method does there. */
const OVERRIDES: Methods = { GET: listOverrides, POST: createOverride };
const OVERRIDE: Methods = { GET: readOverride, PUT: replaceOverride, DELETE: deleteOverride };
const KEY: Methods = { GET: peekKey };
const KEY_ACTIONS: ReadonlyMap<string, Methods> = new Map([
  ["reset", { POST: resetKey }],
  ["block", { POST: blockKey }],
  ["unblock", { POST: unblockKey }],
]);
/** An unknown action under a key: every action is a POST, so other methods answer 405 first. */
const UNKNOWN_KEY_ACTION: Methods = { POST: ({ url }) => Promise.reject(notFound(url)) };

/** Finds the routes of `path` (the request's path as sent) in the table, with the `{domain}` and `{key}` it names. */
function match(admin: Admin, url: URL, path: string): { methods: Methods; domain: string; key: string } {
  const parts = path.slice(ADMIN_PREFIX.length).split("/").map(decodePart);
  const [resource, domain = "", key, action, ...rest] = parts;
  if (rest.length > 0) throw notFound(url);
  if (resource === "overrides") {
    needStore(admin);
    if (domain === "") return { methods: OVERRIDES, domain, key: "" };
    if (key === undefined || key === "" || action !== undefined) throw notFound(url);
    return { methods: OVERRIDE, domain, key };
  }
  if (resource === "keys" && domain && key) {
    if (action === undefined) return { methods: KEY, domain, key };
    return { methods: KEY_ACTIONS.get(action) ?? UNKNOWN_KEY_ACTION, domain, key };
  }
  throw notFound(url);
}

/** One path segment, percent-decoded (keys may contain `/`). */
function decodePart(p: string): string {
  let part: string;
  try {
    part = decodeURIComponent(p);
  } catch {
    throw new HttpError("bad_request", `path: bad percent-encoding in ${JSON.stringify(p)}`);
  }
  // No override can hold it, and PostgreSQL would fail the query as a database error (503).
  if (part.includes("\u0000")) throw new HttpError("bad_request", `path: must not contain U+0000 (got ${JSON.stringify(p)})`);
  return part;
}

/**
 * The override store, each call's failure a StoreFailure (503, "the overrides database failed:
 * ..."); a conflict (409) and a PageRequestError (a page request the store refused: a forged
 * cursor) stay what they are. Any other RangeError is the database's (a driver's own check), not
 * the caller's: 503 too. Whatever else goes wrong in a route is a bug: 500.
 */
function guarded(store: OverrideStore): OverrideStore {
  const fail = (e: unknown) => {
    // A PageRequestError is the caller's input the store refused (a forged cursor): the route makes it a 400.
    throw e instanceof OverrideConflictError || e instanceof PageRequestError ? e : new StoreFailure("overrides database", e, store);
  };
  return new Proxy(store, {
    get(target, name, receiver) {
      const v: unknown = Reflect.get(target, name, receiver);
      if (typeof v !== "function") return v;
      return (...args: unknown[]): unknown => {
        let r: unknown;
        try {
          r = (v as (...a: unknown[]) => unknown).apply(target, args);
        } catch (e) {
          fail(e);
        }
        return r instanceof Promise ? r.catch(fail) : r;
      };
    },
  });
}

function isOverrideStore(x: unknown): x is OverrideStore {
  if (typeof x !== "object" || x === null) return false;
  const s = x as Partial<OverrideStore>;
  return (
    (s.kind === "sqlite" || s.kind === "postgres") &&
    typeof s.get === "function" &&
    typeof s.put === "function" &&
    typeof s.list === "function"
  );
}

function notFound(url: URL): HttpError {
  return new HttpError("not_found", `no admin route ${url.pathname}`);
}

/** 401, with the challenge that tells a client which scheme to use. */
export function unauthorized(): HttpError {
  return new HttpError("unauthorized", "admin API: needs Authorization: Bearer <admin token>", undefined, {
    "www-authenticate": 'Bearer realm="ratekeeper-admin"',
  });
}
