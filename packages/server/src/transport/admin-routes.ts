/**
 * The admin API's routes, one function each. transport/admin.ts authenticates the request,
 * matches its path and method in its route table, and calls one of these with an
 * {@link AdminCall}; each reads what it needs, acts on the override store or the decision
 * service, writes the audit line and answers.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { PageRequestError } from "../overrides/rows.js";
import { parseOverride, toDocument } from "../overrides/schema.js";
import { OverrideConflictError, type Override, type OverrideStore } from "../overrides/types.js";
import { parseDescriptorKey } from "../service/descriptor-key.js";
import type { CheckInput } from "../service/types.js";
import { HttpError, readJson, sendJson as send } from "../http-io.js";
import type { AdminAuditEntry, AdminLimiters } from "./admin.js";

/** The routes' prefix. */
export const ADMIN_PREFIX = "/v1/admin/";

/** The admin handler's context, resolved once by `createAdminHandler`: what every route uses. */
export interface Admin {
  /** The override store; undefined: the override routes answer 404. */
  readonly store: OverrideStore | undefined;
  /** Peek and reset; undefined: those routes answer 404. */
  readonly limiters: AdminLimiters | undefined;
  /** Wall clock, ms since the epoch: `ttl` and what counts as expired. */
  readonly clock: () => number;
  /** Largest request body, in bytes. */
  readonly maxBodyBytes: number;
  /** What to tell the writer of `o` about how the rules in force treat it (transport/override-warnings.ts). */
  warnings(o: Override): string[];
  /** Writes one change to the audit log. */
  audit(entry: AdminAuditEntry): void;
  /**
   * Brings this instance's cache up to date with `change`, just written (read-your-writes). Never
   * rejects: the write is durable, and a cache that cannot catch up now does on its next sync.
   */
  refreshCache(change: AdminAuditEntry): Promise<void>;
}

/** One admin request once its path has matched a route. */
export interface AdminCall {
  readonly admin: Admin;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly url: URL;
  /** The path's `{domain}`; "" on `/v1/admin/overrides` itself. */
  readonly domain: string;
  /** The path's `{key}`; "" on `/v1/admin/overrides` itself. */
  readonly key: string;
}

/** What one route does; it answers through `call.res` or throws an `HttpError`. */
export type AdminRoute = (call: AdminCall) => Promise<void>;

/** `GET /v1/admin/overrides?domain=&prefix=&limit=&cursor=&expired=true`: a page, with `nextCursor`. */
export async function listOverrides({ admin, res, url }: AdminCall): Promise<void> {
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
  const domain = q.get("domain") ?? undefined;
  const keyPrefix = q.get("prefix") ?? undefined;
  for (const [name, value] of [
    ["domain", domain],
    ["prefix", keyPrefix],
  ] as const) {
    // No override holds it, and PostgreSQL would fail the query as a database error (503).
    if (value?.includes("\u0000")) throw new HttpError("bad_request", `${name}: must not contain U+0000`);
  }
  let page;
  try {
    page = await needStore(admin).list({
      domain,
      keyPrefix,
      cursor: q.get("cursor") ?? undefined,
      limit,
      liveAtMs: expired === "true" ? undefined : admin.clock(),
    });
  } catch (e) {
    // A cursor the store cannot read.
    if (e instanceof PageRequestError) throw new HttpError("bad_request", e.message);
    throw e;
  }
  send(res, 200, { items: page.items.map((o) => toDocument(o, true)), nextCursor: page.nextCursor ?? null });
}

/** `POST /v1/admin/overrides`: create (409 when a live one exists). */
export async function createOverride(call: AdminCall): Promise<void> {
  const { admin, res } = call;
  const o = validate(admin, await body(call, false), {});
  try {
    const stored = await needStore(admin).create(o, admin.clock());
    const change: AdminAuditEntry = { action: "create", domain: o.domain, key: o.key };
    await admin.refreshCache(change);
    admin.audit(change);
    res.setHeader("Location", `${ADMIN_PREFIX}overrides/${encodeURIComponent(o.domain)}/${encodeURIComponent(o.key)}`);
    send(res, 201, withWarnings(toDocument(stored, true), admin.warnings(o)));
  } catch (e) {
    if (e instanceof OverrideConflictError) throw new HttpError("conflict", `${e.message}; PUT to replace it`);
    throw e;
  }
}

/** `GET /v1/admin/overrides/{domain}/{key}`: read a live override. */
export async function readOverride({ admin, res, domain, key }: AdminCall): Promise<void> {
  const o = await needStore(admin).get(domain, key);
  if (!o || (o.expiresAtMs !== undefined && o.expiresAtMs <= admin.clock())) {
    throw new HttpError("not_found", `no override for ${JSON.stringify(key)} in domain ${JSON.stringify(domain)}`);
  }
  send(res, 200, toDocument(o, true));
}

/** `PUT /v1/admin/overrides/{domain}/{key}`: create (201) or replace (200). */
export async function replaceOverride(call: AdminCall): Promise<void> {
  const { admin, res, domain, key } = call;
  const store = needStore(admin);
  const o = validate(admin, await body(call, false), { domain, key });
  const updated = await store.update(o);
  const stored = updated ?? (await store.put(o));
  const change: AdminAuditEntry = { action: updated ? "replace" : "create", domain, key };
  await admin.refreshCache(change);
  admin.audit(change);
  send(res, updated ? 200 : 201, withWarnings(toDocument(stored, true), admin.warnings(o)));
}

/** `DELETE /v1/admin/overrides/{domain}/{key}`: delete (204). */
export async function deleteOverride(call: AdminCall): Promise<void> {
  const { admin, res, domain, key } = call;
  await body(call, true);
  if (!(await needStore(admin).delete(domain, key)))
    throw new HttpError("not_found", `no override for ${JSON.stringify(key)} in domain ${JSON.stringify(domain)}`);
  const change: AdminAuditEntry = { action: "delete", domain, key };
  await admin.refreshCache(change);
  admin.audit(change);
  res.statusCode = 204;
  res.end();
}

/** `GET /v1/admin/keys/{domain}/{key}`: the decision a cost-1 check would get now, and the live override. */
export async function peekKey({ admin, res, url, domain, key }: AdminCall): Promise<void> {
  const result = await needLimiters(admin).peek(checkInput(domain, key, url));
  const o = await admin.store?.get(domain, key);
  const live = o && (o.expiresAtMs === undefined || o.expiresAtMs > admin.clock()) ? toDocument(o, true) : null;
  send(res, 200, { domain, key, override: live, result });
}

/** `POST /v1/admin/keys/{domain}/{key}/reset`: forget the key's counters. */
export async function resetKey(call: AdminCall): Promise<void> {
  const { admin, res, url, domain, key } = call;
  await body(call, true);
  const keys = await needLimiters(admin).reset(checkInput(domain, key, url));
  if (keys.length === 0) {
    throw new HttpError("not_found", `no rule or override applies to ${JSON.stringify(key)} in domain ${JSON.stringify(domain)}`);
  }
  admin.audit({ action: "reset", domain, key });
  send(res, 200, { domain, key, reset: keys });
}

/** `POST /v1/admin/keys/{domain}/{key}/block`: `{ttl?|expiresAtMs?, note?}`: an override with policy "blocked". */
export async function blockKey(call: AdminCall): Promise<void> {
  const { admin, res, domain, key } = call;
  const store = needStore(admin);
  const o = validate(admin, (await body(call, true)) ?? {}, { domain, key, policy: "blocked" });
  const stored = await store.put(o);
  const change: AdminAuditEntry = { action: "block", domain, key };
  await admin.refreshCache(change);
  admin.audit(change);
  send(res, 200, toDocument(stored, true));
}

/** `POST /v1/admin/keys/{domain}/{key}/unblock`: removes that block (404 when the key is not blocked). */
export async function unblockKey(call: AdminCall): Promise<void> {
  const { admin, res, domain, key } = call;
  const store = needStore(admin);
  await body(call, true);
  const notBlocked = () => new HttpError("not_found", `${JSON.stringify(key)} in domain ${JSON.stringify(domain)} is not blocked`);
  const o = await store.get(domain, key);
  if (!o || o.policy !== "blocked" || (o.expiresAtMs !== undefined && o.expiresAtMs <= admin.clock())) throw notBlocked();
  // Only a block: another admin may have put an override in its place since the read above.
  if (!(await store.delete(domain, key, "blocked"))) throw notBlocked();
  const change: AdminAuditEntry = { action: "unblock", domain, key };
  await admin.refreshCache(change);
  admin.audit(change);
  send(res, 200, { domain, key, blocked: false });
}

/** The override store, or 404 when the service runs without one. */
export function needStore(admin: Admin): OverrideStore {
  if (!admin.store) throw new HttpError("not_found", "no overrides store is configured (start with --overrides URL)");
  return admin.store;
}

function needLimiters(admin: Admin): AdminLimiters {
  if (!admin.limiters) throw new HttpError("not_found", "peek and reset are not available in this service");
  return admin.limiters;
}

/** The request's JSON body within the size cap; `optional`: an empty body reads as undefined. */
function body(call: AdminCall, optional: boolean): Promise<unknown> {
  return readJson(call.req, call.admin.maxBodyBytes, optional);
}

/** The override a body describes, with the path's fields fixed; 400 listing every problem otherwise. */
function validate(admin: Admin, body: unknown, fixed: { domain?: string; key?: string; policy?: Override["policy"] }): Override {
  const r = parseOverride(body, { nowMs: admin.clock(), ...fixed });
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

/** An override's document, with `warnings` when there are any. */
function withWarnings(doc: object, warnings: string[]): object {
  return warnings.length > 0 ? { ...doc, warnings } : doc;
}
