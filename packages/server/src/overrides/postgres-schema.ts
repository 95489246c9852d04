import type pg from "pg";

/** The columns of `ratekeeper_overrides`, in the order `OverrideRow` reads them. */
export const COLUMNS = "domain, key, policy, expires_at_ms, note, version, updated_at_ms, deleted";

/**
 * Advisory lock taken by every write transaction (and by migrations). Writes are admin actions,
 * rare next to checks; serialising them makes version order equal commit order, so a cache that
 * resumes the change feed from its last version can never skip a change that committed late.
 */
export const WRITE_LOCK_ID = 0x726b6f76; // "rkov"

/**
 * Migrations, applied in order under the advisory lock (two instances starting at once do not
 * race on CREATE) and recorded in `ratekeeper_meta.schema`, so opening is idempotent. Keys use
 * the "C" collation: byte-wise order, the same as SQLite's BINARY, for stable cursors.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS ratekeeper_overrides (
     domain text COLLATE "C" NOT NULL,
     key text COLLATE "C" NOT NULL,
     policy text NOT NULL,
     expires_at_ms bigint,
     note text,
     version bigint NOT NULL,
     updated_at_ms bigint NOT NULL,
     deleted boolean NOT NULL DEFAULT false,
     PRIMARY KEY (domain, key)
   );
   CREATE INDEX IF NOT EXISTS ratekeeper_overrides_version ON ratekeeper_overrides (version);
   CREATE INDEX IF NOT EXISTS ratekeeper_overrides_expiry ON ratekeeper_overrides (expires_at_ms) WHERE expires_at_ms IS NOT NULL AND NOT deleted;
   CREATE SEQUENCE IF NOT EXISTS ratekeeper_overrides_version_seq;
   INSERT INTO ratekeeper_meta (name, value) VALUES ('horizon', 0) ON CONFLICT (name) DO NOTHING;`,
  // The minute's purge forgets old tombstones (deleted AND updated_at_ms < cutoff) under the write
  // lock: without this it read the whole table (1,000,000 overrides: 80-120 ms a minute per instance).
  `CREATE INDEX IF NOT EXISTS ratekeeper_overrides_tombstones ON ratekeeper_overrides (updated_at_ms) WHERE deleted;`,
];

/**
 * Runs `fn` in a transaction under the write lock on a pooled connection, and returns its result
 * once committed. The connection goes back to the pool at COMMIT (or ROLLBACK); one whose
 * ROLLBACK failed is gone, so it is discarded rather than pooled.
 */
export async function inWriteTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: unknown;
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [WRITE_LOCK_ID]);
    const result = await fn(client);
    await client.query("COMMIT");
    return result;
  } catch (e) {
    // A statement that got no answer in time (pg's client-side "Query read timeout": the server
    // is stopped or cut off) leaves the connection with nothing more to say: a ROLLBACK would
    // wait behind it a whole second timeout before the caller heard anything. The connection is
    // discarded instead, and PostgreSQL rolls back a transaction whose connection is gone.
    if (e instanceof Error && e.message === "Query read timeout") broken = e;
    else await client.query("ROLLBACK").catch((r: unknown) => (broken = r));
    throw e;
  } finally {
    client.release(broken === undefined ? undefined : toError(broken));
  }
}

/** Creates or upgrades the schema: every migration not yet recorded, under the write lock. */
export async function migrate(pool: pg.Pool): Promise<void> {
  await inWriteTransaction(pool, async (client) => {
    await client.query("CREATE TABLE IF NOT EXISTS ratekeeper_meta (name text PRIMARY KEY, value bigint NOT NULL)");
    await client.query("INSERT INTO ratekeeper_meta (name, value) VALUES ('schema', 0) ON CONFLICT (name) DO NOTHING");
    const { rows } = await client.query<{ value: string }>("SELECT value FROM ratekeeper_meta WHERE name = 'schema'");
    const current = Number(rows[0]?.value ?? 0);
    for (let i = current; i < MIGRATIONS.length; i++) await client.query(MIGRATIONS[i] as string);
    await client.query("UPDATE ratekeeper_meta SET value = $1 WHERE name = 'schema' AND value < $1", [MIGRATIONS.length]);
  });
}

/** `e` as an Error (a thrown non-Error wrapped). */
export function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
