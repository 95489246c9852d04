import type { IncomingMessage, ServerResponse } from "node:http";
import { parseOverride, toDocument } from "../overrides/schema.js";
import type { CheckInput, CheckResult } from "../service/types.js";
import { parseDescriptorKey } from "../service/descriptor-key.js";
import { OverrideConflictError, type Override, type OverrideStore } from "../overrides/types.js";
import { HttpError, methodNotAllowed, readJson as readBody, sendError, sendJson as send, TokenCheck } from "../http-io.js";

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
  readonly logger?: { info(obj: object, msg: string): void } | undefined;
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
}

/** Answers an admin request; resolves true when it handled it (false: not an admin route). */
export type AdminHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/** One change made through the admin API, for the audit log. */
export interface AdminAuditEntry {
  readonly action: "create" | "replace" | "delete" | "block" | "unblock" | "reset";
  readonly domain: string;
  readonly key: string;
}

/** The routes' prefix. */
export const ADMIN_PREFIX = "/v1/admin/";

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
  const store = isOverrideStore(ctx.overrides) ? ctx.overrides : undefined;
  const audit = (entry: AdminAuditEntry) => ctx.logger?.info({ admin: entry }, "admin change");
  const clock = ctx.clock ?? Date.now;
  const maxBodyBytes = ctx.maxBodyBytes ?? 1024 * 1024;
  const readJson = (req: IncomingMessage, optional: boolean) => readBody(req, maxBodyBytes, optional);

  return async function adminHandler(req, res) {
    const url = new URL(req.url ?? "/", "http://admin.invalid");
    if (!url.pathname.startsWith(ADMIN_PREFIX)) return false;
    try {
      if (!authInTransport && !expected) throw new HttpError("not_found", "the admin API is off (no admin token is configured)");
      if (expected && !expected.matches(req.headers.authorization)) throw unauthorized();
      await route(req, res, url);
    } catch (e) {
      sendError(req, res, e);
    }
    return true;
  };

  async function route(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const parts = url.pathname
      .slice(ADMIN_PREFIX.length)
      .split("/")
      .map((p) => {
        try {
          return decodeURIComponent(p);
        } catch {
          throw new HttpError("bad_request", `path: bad percent-encoding in ${JSON.stringify(p)}`);
        }
      });
    const method = req.method ?? "GET";
    const [resource, domain, key, action, ...rest] = parts;
    if (rest.length > 0) throw notFound(url);

    if (resource === "overrides") {
      if (!store) throw new HttpError("not_found", "no overrides store is configured (start with --overrides URL)");
      if (domain === undefined || domain === "") {
        if (method === "GET") return list(res, store, url);
        if (method === "POST") return create(req, res, store);
        throw methodNotAllowed("GET, POST");
      }
      if (key === undefined || key === "" || action !== undefined) throw notFound(url);
      if (method === "GET") return read(res, store, domain, key);
      if (method === "PUT") return replace(req, res, store, domain, key);
      if (method === "DELETE") return remove(req, res, store, domain, key);
      throw methodNotAllowed("GET, PUT, DELETE");
    }

    if (resource === "keys" && domain && key) {
      if (action === undefined) {
        if (method !== "GET") throw methodNotAllowed("GET");
        const result = await needLimiters().peek(checkInput(domain, key, url));
        const o = await store?.get(domain, key);
        const live = o && (o.expiresAtMs === undefined || o.expiresAtMs > clock()) ? toDocument(o, true) : null;
        return send(res, 200, { domain, key, override: live, result });
      }
      if (method !== "POST") throw methodNotAllowed("POST");
      if (action === "reset") {
        await readJson(req, true);
        const keys = await needLimiters().reset(checkInput(domain, key, url));
        if (keys.length === 0) {
          throw new HttpError("not_found", `no rule or override applies to ${JSON.stringify(key)} in domain ${JSON.stringify(domain)}`);
        }
        audit({ action: "reset", domain, key });
        return send(res, 200, { domain, key, reset: keys });
      }
      if (action === "block") return block(req, res, needStore(), domain, key);
      if (action === "unblock") return unblock(req, res, needStore(), domain, key);
    }
    throw notFound(url);
  }

  function needLimiters(): AdminLimiters {
    if (!ctx.limiters) throw new HttpError("not_found", "peek and reset are not available in this service");
    return ctx.limiters;
  }
  function needStore(): OverrideStore {
    if (!store) throw new HttpError("not_found", "no overrides store is configured (start with --overrides URL)");
    return store;
  }

  async function list(res: ServerResponse, store: OverrideStore, url: URL): Promise<void> {
    const q = url.searchParams;
    const limitText = q.get("limit");
    const limit = limitText === null ? undefined : Number(limitText);
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000)) {
      throw new HttpError("bad_request", `limit: must be a whole number from 1 to 1000 (got ${JSON.stringify(limitText)})`);
    }
    const expired = q.get("expired");
    if (expired !== null && expired !== "true" && expired !== "false") {
      throw new HttpError("bad_request", `expired: must be true or false (got ${JSON.stringify(expired)})`);
    }
    let page;
    try {
      page = await store.list({
        domain: q.get("domain") ?? undefined,
        keyPrefix: q.get("prefix") ?? undefined,
        cursor: q.get("cursor") ?? undefined,
        limit,
        liveAtMs: expired === "true" ? undefined : clock(),
      });
    } catch (e) {
      if (e instanceof RangeError) throw new HttpError("bad_request", e.message);
      throw e;
    }
    send(res, 200, { items: page.items.map((o) => toDocument(o, true)), nextCursor: page.nextCursor ?? null });
  }

  async function create(req: IncomingMessage, res: ServerResponse, store: OverrideStore): Promise<void> {
    const o = validate(await readJson(req, false), {});
    try {
      const stored = await store.create(o, clock());
      await settle();
      audit({ action: "create", domain: o.domain, key: o.key });
      res.setHeader("Location", `${ADMIN_PREFIX}overrides/${encodeURIComponent(o.domain)}/${encodeURIComponent(o.key)}`);
      send(res, 201, toDocument(stored, true));
    } catch (e) {
      if (e instanceof OverrideConflictError) throw new HttpError("conflict", `${e.message}; PUT to replace it`);
      throw e;
    }
  }

  async function read(res: ServerResponse, store: OverrideStore, domain: string, key: string): Promise<void> {
    const o = await store.get(domain, key);
    if (!o || (o.expiresAtMs !== undefined && o.expiresAtMs <= clock())) {
      throw new HttpError("not_found", `no override for ${JSON.stringify(key)} in domain ${JSON.stringify(domain)}`);
    }
    send(res, 200, toDocument(o, true));
  }

  async function replace(req: IncomingMessage, res: ServerResponse, store: OverrideStore, domain: string, key: string): Promise<void> {
    const o = validate(await readJson(req, false), { domain, key });
    const updated = await store.update(o);
    const stored = updated ?? (await store.put(o));
    await settle();
    audit({ action: updated ? "replace" : "create", domain, key });
    send(res, updated ? 200 : 201, toDocument(stored, true));
  }

  async function remove(req: IncomingMessage, res: ServerResponse, store: OverrideStore, domain: string, key: string): Promise<void> {
    await readJson(req, true);
    if (!(await store.delete(domain, key)))
      throw new HttpError("not_found", `no override for ${JSON.stringify(key)} in domain ${JSON.stringify(domain)}`);
    await settle();
    audit({ action: "delete", domain, key });
    res.statusCode = 204;
    res.end();
  }

  async function block(req: IncomingMessage, res: ServerResponse, store: OverrideStore, domain: string, key: string): Promise<void> {
    const o = validate((await readJson(req, true)) ?? {}, { domain, key, policy: "blocked" });
    const stored = await store.put(o);
    await settle();
    audit({ action: "block", domain, key });
    send(res, 200, toDocument(stored, true));
  }

  async function unblock(req: IncomingMessage, res: ServerResponse, store: OverrideStore, domain: string, key: string): Promise<void> {
    await readJson(req, true);
    const o = await store.get(domain, key);
    if (!o || o.policy !== "blocked" || (o.expiresAtMs !== undefined && o.expiresAtMs <= clock())) {
      throw new HttpError("not_found", `${JSON.stringify(key)} in domain ${JSON.stringify(domain)} is not blocked`);
    }
    await store.delete(domain, key);
    await settle();
    audit({ action: "unblock", domain, key });
    send(res, 200, { domain, key, blocked: false });
  }

  function validate(body: unknown, fixed: { domain?: string; key?: string; policy?: Override["policy"] }): Override {
    const r = parseOverride(body, { nowMs: clock(), ...fixed });
    if (!r.ok) {
      const first = r.issues[0];
      const message =
        r.issues.length === 1 && first
          ? `${first.path}: ${first.message}`
          : `${r.issues.length} problems: ${r.issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`;
      throw new HttpError("bad_request", message, r.issues);
    }
    return r.override;
  }

  /** Brings this instance's cache up to date with a write just made (read-your-writes). */
  async function settle(): Promise<void> {
    // The write is durable already; a cache that cannot catch up now will on the next signal.
    await ctx.cache?.refresh().catch(() => undefined);
  }
}

/**
 * The check a key names: a canonical descriptor key (`user_id=42`, `a=1|b=2`), or with
 * `?policy=<name>` a plain key under that named policy (as `GET /v1/keys/...`).
 */
function checkInput(domain: string, key: string, url: URL): CheckInput {
  const policy = url.searchParams.get("policy");
  if (policy !== null) return { domain, key, policy };
  const entries = parseDescriptorKey(key);
  if (!entries) {
    throw new HttpError(
      "bad_request",
      `key: ${JSON.stringify(key)} is not a descriptor key (key=value, several joined by |); for a plain key add ?policy=<name>`,
    );
  }
  return { domain, descriptors: [entries] };
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
