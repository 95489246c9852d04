/**
 * The SQLite override store's schema: its migrations (recorded in `user_version`) and the
 * statements the store prepares once on its handle (sqlite.ts).
 */
import type Database from "better-sqlite3";
import type { OverrideRow } from "./rows.js";

/**
 * Migrations, applied in order and recorded in SQLite's `user_version`, so opening is idempotent
 * and a newer build can add steps. Rows are never removed by a delete at first: they become
 * tombstones (`deleted = 1`) with a new version, so a cache following the change feed sees the
 * deletion; tombstones are forgotten after a retention period (see `purge`).
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS ratekeeper_overrides (
     domain TEXT NOT NULL,
     key TEXT NOT NULL,
     policy TEXT NOT NULL,
     expires_at_ms INTEGER,
     note TEXT,
     version INTEGER NOT NULL,
     updated_at_ms INTEGER NOT NULL,
     deleted INTEGER NOT NULL DEFAULT 0,
     PRIMARY KEY (domain, key)
   ) WITHOUT ROWID;
   CREATE INDEX IF NOT EXISTS ratekeeper_overrides_version ON ratekeeper_overrides (version);
   CREATE INDEX IF NOT EXISTS ratekeeper_overrides_expiry ON ratekeeper_overrides (expires_at_ms) WHERE expires_at_ms IS NOT NULL AND deleted = 0;
   CREATE TABLE IF NOT EXISTS ratekeeper_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
   INSERT OR IGNORE INTO ratekeeper_meta (name, value) VALUES ('version', 0), ('horizon', 0);`,
  // The minute's purge forgets old tombstones (deleted = 1 AND updated_at_ms < cutoff): without
  // this it read the whole table, on the event loop (1,000,000 overrides: about 60 ms a minute).
  `CREATE INDEX IF NOT EXISTS ratekeeper_overrides_tombstones ON ratekeeper_overrides (updated_at_ms) WHERE deleted = 1;`,
];

/** The columns of `ratekeeper_overrides`, in the order `OverrideRow` and {@link RawRow} read them. */
export const COLUMNS = "domain, key, policy, expires_at_ms, note, version, updated_at_ms, deleted";
/** A row as better-sqlite3's raw mode gives it, in {@link COLUMNS} order. */
export type RawRow = [string, string, string, number | null, string | null, number, number, number];

/** Brings the database's schema up to date: the migrations it has not had, each in its own transaction. */
export function migrate(db: Database.Database): void {
  const current = db.pragma("user_version", { simple: true }) as number;
  for (let i = current; i < MIGRATIONS.length; i++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[i] as string);
      db.pragma(`user_version = ${i + 1}`);
    }).immediate();
  }
}

type Statement<Args extends unknown[], Row = unknown> = Database.Statement<Args, Row>;

/** The store's statements, prepared once on its handle. */
export interface Statements {
  /** The live row of a domain and key. */
  readonly get: Statement<[string, string], OverrideRow>;
  /** Adds n to the version counter, returning the new value. */
  readonly bump: Statement<[number], { value: number }>;
  readonly version: Statement<[], { value: number }>;
  /** The version below which tombstones were forgotten (the change feed cannot resume below it). */
  readonly horizon: Statement<[], { value: number }>;
  /** Writes a live row: domain, key, policy, expires_at_ms, note, version, updated_at_ms. */
  readonly upsert: Statement<unknown[]>;
  /** Turns a live row into a tombstone: version, updated_at_ms, domain, key. */
  readonly tombstone: Statement<unknown[]>;
  /** Live rows in key order, as raw arrays ({@link RawRow}): the first page, and the page after (domain, key). */
  readonly scanFirst: Statement<[number], unknown[]>;
  readonly scanAfter: Statement<[string, string, number], unknown[]>;
  /** Rows (tombstones included) changed after a version, in version order. */
  readonly changes: Statement<[number, number], OverrideRow>;
  /** Live rows expired at a time. */
  readonly expired: Statement<[number], { domain: string; key: string }>;
  /** The newest version and the count of tombstones older than a time; and their removal. */
  readonly oldTombstones: Statement<[number], { v: number | null; n: number }>;
  readonly dropTombstones: Statement<unknown[]>;
  /** Raises the horizon to a version. */
  readonly setHorizon: Statement<unknown[]>;
}

/** Prepares every statement the store runs (all but `list`'s, whose WHERE depends on its filters). */
export function prepareStatements(db: Database.Database): Statements {
  return {
    get: db.prepare<[string, string], OverrideRow>(
      `SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE domain = ? AND key = ? AND deleted = 0`,
    ),
    bump: db.prepare<[number], { value: number }>(`UPDATE ratekeeper_meta SET value = value + ? WHERE name = 'version' RETURNING value`),
    version: db.prepare<[], { value: number }>(`SELECT value FROM ratekeeper_meta WHERE name = 'version'`),
    horizon: db.prepare<[], { value: number }>(`SELECT value FROM ratekeeper_meta WHERE name = 'horizon'`),
    upsert: db.prepare(
      `INSERT INTO ratekeeper_overrides (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, 0)
       ON CONFLICT (domain, key) DO UPDATE SET policy = excluded.policy, expires_at_ms = excluded.expires_at_ms,
         note = excluded.note, version = excluded.version, updated_at_ms = excluded.updated_at_ms, deleted = 0`,
    ),
    tombstone: db.prepare(
      `UPDATE ratekeeper_overrides SET deleted = 1, version = ?, updated_at_ms = ? WHERE domain = ? AND key = ? AND deleted = 0`,
    ),
    scanFirst: db
      .prepare<[number], unknown[]>(`SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE deleted = 0 ORDER BY domain, key LIMIT ?`)
      .raw(true),
    scanAfter: db
      .prepare<[string, string, number], unknown[]>(
        `SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE (domain, key) > (?, ?) AND deleted = 0 ORDER BY domain, key LIMIT ?`,
      )
      .raw(true),
    changes: db.prepare<[number, number], OverrideRow>(
      `SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE version > ? ORDER BY version LIMIT ?`,
    ),
    expired: db.prepare<[number], { domain: string; key: string }>(
      `SELECT domain, key FROM ratekeeper_overrides WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= ? AND deleted = 0`,
    ),
    oldTombstones: db.prepare<[number], { v: number | null; n: number }>(
      `SELECT max(version) AS v, count(*) AS n FROM ratekeeper_overrides WHERE deleted = 1 AND updated_at_ms < ?`,
    ),
    dropTombstones: db.prepare(`DELETE FROM ratekeeper_overrides WHERE deleted = 1 AND updated_at_ms < ?`),
    setHorizon: db.prepare(`UPDATE ratekeeper_meta SET value = max(value, ?) WHERE name = 'horizon'`),
  };
}
