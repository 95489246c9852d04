import { deserializePolicy } from "./schema.js";
import type { Override, OverrideChange, StoredOverride } from "./types.js";

/** One row of `ratekeeper_overrides`, as both backends return it (numbers may come as strings from pg). */
export interface OverrideRow {
  domain: string;
  key: string;
  policy: string;
  expires_at_ms: number | string | null;
  note: string | null;
  version: number | string;
  updated_at_ms: number | string;
  deleted: number | boolean;
}

/** Shares policy objects between rows with the same policy text; bounded so it cannot grow forever. */
export class PolicyInterner {
  private map = new Map<string, Override["policy"]>();
  constructor(private readonly maxEntries = 100_000) {}
  /** The shared, frozen policy for `text`. */
  get(text: string): Override["policy"] {
    if (this.map.size >= this.maxEntries) this.map = new Map();
    return deserializePolicy(text, this.map);
  }
}

/** Maps a row to a stored override (live or not). */
export function rowToOverride(row: OverrideRow, policies: PolicyInterner): StoredOverride {
  return {
    domain: row.domain,
    key: row.key,
    policy: policies.get(row.policy),
    expiresAtMs: row.expires_at_ms === null ? undefined : Number(row.expires_at_ms),
    note: row.note ?? undefined,
    version: Number(row.version),
    updatedAtMs: Number(row.updated_at_ms),
  };
}

/** Maps a row to a change-feed entry: deleted rows (tombstones) become deletions. */
export function rowToChange(row: OverrideRow, policies: PolicyInterner): OverrideChange {
  const deleted = row.deleted === true || row.deleted === 1;
  return {
    version: Number(row.version),
    domain: row.domain,
    key: row.key,
    override: deleted ? undefined : rowToOverride(row, policies),
  };
}

/** Opaque keyset cursor: the last (domain, key) of a page. */
export function encodeCursor(domain: string, key: string): string {
  return Buffer.from(JSON.stringify([domain, key]), "utf8").toString("base64url");
}

/**
 * A page request the caller got wrong (a forged cursor, a bad limit): the admin API's 400. A
 * RangeError as before, but its own class: a database driver's RangeError is the database failing
 * (503), not the caller's input.
 */
export class PageRequestError extends RangeError {}

/** Reads a cursor from {@link encodeCursor}; throws a {@link PageRequestError} naming `cursor` when it is not one. */
export function decodeCursor(cursor: string): [string, string] {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    // A forged cursor holding U+0000 would fail PostgreSQL's query as a database error; no key holds it.
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === "string" && typeof v[1] === "string" && !`${v[0]}${v[1]}`.includes("\u0000"))
      return [v[0], v[1]];
  } catch {
    // fall through to the error below
  }
  throw new PageRequestError(`cursor: not a cursor returned by a previous page (got ${JSON.stringify(cursor.slice(0, 40))})`);
}

/** Clamps a page size: default 100, at most 1000. */
export function pageSize(limit: number | undefined): number {
  if (limit === undefined) return 100;
  if (!Number.isSafeInteger(limit) || limit < 1) throw new PageRequestError(`limit: must be a whole number from 1 to 1000 (got ${limit})`);
  return Math.min(limit, 1000);
}
