import pg from "pg";
import { NOTIFY_CHANNEL, payload, PostgresChangeFeed, type ListenerEvent } from "./postgres-feed.js";
import { COLUMNS, inWriteTransaction, migrate } from "./postgres-schema.js";
import { serializePolicy } from "./schema.js";
import { PolicyInterner, decodeCursor, encodeCursor, pageSize, rowToChange, rowToOverride, type OverrideRow } from "./rows.js";
import {
  OverrideConflictError,
  type ChangeBatch,
  type ChangeSignal,
  type ListOverridesOptions,
  type Override,
  type OverridePage,
  type OverrideStore,
  type StoredOverride,
} from "./types.js";

export { NOTIFY_CHANNEL, type ListenerEvent } from "./postgres-feed.js";

/** Rows per INSERT in {@link PostgresOverrideStore.putMany}: one statement of array parameters (unnest). */
const BULK_ROWS = 5000;

/** Options for {@link PostgresOverrideStore}. */
export interface PostgresOverrideStoreOptions {
  /** `postgres://user:password@host:port/database` (any libpq-style URL `pg` accepts). */
  readonly connectionString: string;
  /** Pool size for reads and writes (the LISTEN connection is extra). @default 4 */
  readonly maxConnections?: number;
  /**
   * How often to prove the LISTEN connection alive with `SELECT 1`, in ms. A connection dropped
   * without a FIN (a dead NAT entry) sends no 'error' or 'end'; the keepalive query notices it.
   * @default 5000
   */
  readonly keepaliveIntervalMs?: number;
  /** How long the keepalive query may take before the connection counts as lost, in ms. @default 3000 */
  readonly keepaliveTimeoutMs?: number;
  /** Reconnect backoff: first and largest wait, in ms (doubling in between). @default [100, 5000] */
  readonly reconnectDelayMs?: readonly [number, number];
  /** `application_name` of the connections (the LISTEN one gets a `-listen` suffix). @default "ratekeeper" */
  readonly applicationName?: string;
  /**
   * Longest a query may take, in ms (PostgreSQL's `statement_timeout`, and the client's own
   * timeout a little later for a server that does not answer at all). A hung query would
   * otherwise stall the cache's catch-up, and every admin write waiting on it, for good. Also
   * how long a transaction may sit idle (`idle_in_transaction_session_timeout`) before
   * PostgreSQL ends it, releasing the write lock a stalled instance held.
   * @default 30000
   */
  readonly queryTimeoutMs?: number;
  /** Wall clock for `updatedAtMs`, ms since the epoch. @default Date.now */
  readonly clock?: () => number;
  /** Told when the notification connection is established, lost or fails to come back. */
  readonly onListenerEvent?: (event: ListenerEvent) => void;
}

/**
 * The shared configuration store: PostgreSQL, for many service instances. Every write runs in
 * a transaction that takes one advisory lock, draws versions from a sequence, and ends with
 * `pg_notify('ratekeeper_overrides', ...)`, delivered to every LISTENing instance at commit.
 * The LISTEN connection is watched and reconnected (postgres-feed.ts); subscribers are told to
 * resynchronise from their last version after every reconnect, so nothing written in between
 * is missed.
 * @example
 * const store = await PostgresOverrideStore.open({ connectionString: "postgres://postgres@127.0.0.1/ratekeeper" });
 */
export class PostgresOverrideStore implements OverrideStore {
  readonly kind = "postgres" as const;
  readonly description: string;
  private readonly pool: pg.Pool;
  private readonly clock: () => number;
  private readonly policies = new PolicyInterner();
  /** The LISTEN connection and its subscribers (postgres-feed.ts). */
  private readonly feed: PostgresChangeFeed;

  private constructor(private readonly options: PostgresOverrideStoreOptions) {
    this.description = redactUrl(options.connectionString);
    this.clock = options.clock ?? Date.now;
    this.feed = new PostgresChangeFeed(options);
    this.pool = new pg.Pool({
      connectionString: options.connectionString,
      max: options.maxConnections ?? 4,
      application_name: options.applicationName ?? "ratekeeper",
      keepAlive: true,
      statement_timeout: options.queryTimeoutMs ?? 30_000,
      // Every write holds the one write lock (postgres-schema.ts) until COMMIT. An instance that
      // stalls inside a write (stopped, paused, cut off without a FIN) would hold it, and stop
      // every other instance's writes and purges, until TCP keepalive gave up on it (hours):
      // PostgreSQL ends a transaction left idle this long, which releases the lock.
      idle_in_transaction_session_timeout: options.queryTimeoutMs ?? 30_000,
      query_timeout: (options.queryTimeoutMs ?? 30_000) + 5_000,
      connectionTimeoutMillis: 10_000,
    });
    // A connection PostgreSQL terminates (pg_terminate_backend, a restart, a failover) emits
    // 'error', and an 'error' event with no listener ends the process. The pool listens only
    // on idle connections; a checked-out one between two queries, or one terminated in the
    // same network read that finished its connect, has none. So every connection gets a
    // listener of its own for its whole life. The query in flight fails on its own; at release
    // the pool discards a connection that is no longer usable, and the next caller gets a
    // fresh one.
    this.pool.on("connect", (client) => client.on("error", () => undefined));
    // The pool re-emits an idle connection's error after discarding it.
    this.pool.on("error", () => undefined);
  }

  /** Connects and creates or upgrades the schema. */
  static async open(options: PostgresOverrideStoreOptions): Promise<PostgresOverrideStore> {
    const store = new PostgresOverrideStore(options);
    try {
      await migrate(store.pool);
    } catch (e) {
      await store.pool.end().catch(() => undefined);
      throw e;
    }
    return store;
  }

  /**
   * Runs `fn` in a write transaction under the advisory lock; `fn` returns its result and the
   * NOTIFY payload (undefined: nothing changed, no notification). The connection goes back to
   * the pool at COMMIT, before this process's subscribers are told: they read the change back
   * through the pool, and a write that held its connection while waiting for another one would
   * deadlock as soon as more writes run at once than the pool has connections.
   */
  private async write<T>(fn: (c: pg.PoolClient) => Promise<{ result: T; notify: Record<string, unknown> | undefined }>): Promise<T> {
    const committed = await inWriteTransaction(this.pool, async (client) => {
      const done = await fn(client);
      if (done.notify !== undefined) await client.query("SELECT pg_notify($1, $2)", [NOTIFY_CHANNEL, payload(done.notify)]);
      return done;
    });
    const version = typeof committed.notify?.v === "number" ? committed.notify.v : undefined;
    // Tell this process's subscribers at once (and wait for them: read-your-writes); other
    // instances hear the NOTIFY.
    if (version !== undefined) await this.feed.emit({ version });
    return committed.result;
  }

  private async upsert(c: pg.PoolClient, o: Override, nowMs: number): Promise<StoredOverride> {
    const { rows } = await c.query<{ version: string }>(
      `INSERT INTO ratekeeper_overrides (${COLUMNS})
       VALUES ($1, $2, $3, $4, $5, nextval('ratekeeper_overrides_version_seq'), $6, false)
       ON CONFLICT (domain, key) DO UPDATE SET policy = EXCLUDED.policy, expires_at_ms = EXCLUDED.expires_at_ms,
         note = EXCLUDED.note, version = EXCLUDED.version, updated_at_ms = EXCLUDED.updated_at_ms, deleted = false
       RETURNING version`,
      [o.domain, o.key, serializePolicy(o.policy), o.expiresAtMs ?? null, o.note ?? null, nowMs],
    );
    return { ...o, version: Number(rows[0]?.version), updatedAtMs: nowMs };
  }

  private async liveRow(c: pg.PoolClient | pg.Pool, domain: string, key: string): Promise<OverrideRow | undefined> {
    const { rows } = await c.query<OverrideRow>(
      `SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE domain = $1 AND key = $2 AND NOT deleted`,
      [domain, key],
    );
    return rows[0];
  }

  async get(domain: string, key: string): Promise<StoredOverride | undefined> {
    const row = await this.liveRow(this.pool, domain, key);
    return row ? rowToOverride(row, this.policies) : undefined;
  }

  create(override: Override, nowMs: number): Promise<StoredOverride> {
    return this.write(async (c) => {
      const row = await this.liveRow(c, override.domain, override.key);
      if (row && (row.expires_at_ms === null || Number(row.expires_at_ms) > nowMs))
        throw new OverrideConflictError(override.domain, override.key);
      const result = await this.upsert(c, override, this.clock());
      return { result, notify: { v: result.version, d: override.domain, k: override.key } };
    });
  }

  update(override: Override): Promise<StoredOverride | undefined> {
    return this.write(async (c) => {
      if (!(await this.liveRow(c, override.domain, override.key))) return { result: undefined, notify: undefined };
      const result = await this.upsert(c, override, this.clock());
      return { result, notify: { v: result.version, d: override.domain, k: override.key } };
    });
  }

  put(override: Override): Promise<StoredOverride> {
    return this.write(async (c) => {
      const result = await this.upsert(c, override, this.clock());
      return { result, notify: { v: result.version, d: override.domain, k: override.key } };
    });
  }

  putMany(overrides: readonly Override[]): Promise<number> {
    if (overrides.length === 0) return Promise.resolve(0);
    // ON CONFLICT DO UPDATE may not touch one row twice in a statement: the last line for a key wins.
    const unique = new Map<string, Override>();
    for (const o of overrides) unique.set(`${o.domain}\u0000${o.key}`, o);
    const all = [...unique.values()];
    return this.write(async (c) => {
      const nowMs = this.clock();
      let top = 0;
      for (let i = 0; i < all.length; i += BULK_ROWS) {
        const batch = all.slice(i, i + BULK_ROWS);
        // One statement per batch with array parameters: far fewer round trips than row-by-row INSERTs.
        const { rows } = await c.query<{ v: string | null }>(
          `WITH w AS (
             INSERT INTO ratekeeper_overrides (${COLUMNS})
             SELECT d, k, p, e, n, nextval('ratekeeper_overrides_version_seq'), $6, false
               FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) AS t(d, k, p, e, n)
             ON CONFLICT (domain, key) DO UPDATE SET policy = EXCLUDED.policy, expires_at_ms = EXCLUDED.expires_at_ms,
               note = EXCLUDED.note, version = EXCLUDED.version, updated_at_ms = EXCLUDED.updated_at_ms, deleted = false
             RETURNING version)
           SELECT max(version) AS v FROM w`,
          [
            batch.map((o) => o.domain),
            batch.map((o) => o.key),
            batch.map((o) => serializePolicy(o.policy)),
            batch.map((o) => o.expiresAtMs ?? null),
            batch.map((o) => o.note ?? null),
            nowMs,
          ],
        );
        top = Math.max(top, Number(rows[0]?.v ?? 0));
      }
      return { result: all.length, notify: { v: top, n: all.length } };
    });
  }

  delete(domain: string, key: string, onlyPolicy?: "blocked" | "unlimited"): Promise<boolean> {
    return this.write(async (c) => {
      const { rows } = await c.query<{ version: string }>(
        `UPDATE ratekeeper_overrides SET deleted = true, version = nextval('ratekeeper_overrides_version_seq'), updated_at_ms = $3
         WHERE domain = $1 AND key = $2 AND NOT deleted AND ($4::text IS NULL OR policy = $4) RETURNING version`,
        [domain, key, this.clock(), onlyPolicy ?? null],
      );
      const row = rows[0];
      return { result: row !== undefined, notify: row ? { v: Number(row.version), d: domain, k: key } : undefined };
    });
  }

  async list(options: ListOverridesOptions = {}): Promise<OverridePage> {
    const limit = pageSize(options.limit);
    const where: string[] = ["NOT deleted"];
    const args: unknown[] = [];
    const arg = (v: unknown) => {
      args.push(v);
      return `$${args.length}`;
    };
    if (options.domain !== undefined) where.push(`domain = ${arg(options.domain)}`);
    if (options.keyPrefix !== undefined && options.keyPrefix !== "") {
      const p = arg(options.keyPrefix);
      where.push(`key >= ${p} AND starts_with(key, ${p})`);
    }
    if (options.liveAtMs !== undefined) where.push(`(expires_at_ms IS NULL OR expires_at_ms > ${arg(options.liveAtMs)})`);
    if (options.cursor !== undefined) {
      const [d, k] = decodeCursor(options.cursor);
      where.push(`(domain, key) > (${arg(d)}, ${arg(k)})`);
    }
    const { rows } = await this.pool.query<OverrideRow>(
      `SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE ${where.join(" AND ")} ORDER BY domain, key LIMIT ${arg(limit + 1)}`,
      args,
    );
    const more = rows.length > limit;
    const items = rows.slice(0, limit).map((r) => rowToOverride(r, this.policies));
    const lastItem = items[items.length - 1];
    return { items, nextCursor: more && lastItem ? encodeCursor(lastItem.domain, lastItem.key) : undefined };
  }

  async currentVersion(): Promise<number> {
    const { rows } = await this.pool.query<{ v: string }>(
      `SELECT greatest((SELECT coalesce(max(version), 0) FROM ratekeeper_overrides), (SELECT value FROM ratekeeper_meta WHERE name = 'horizon')) AS v`,
    );
    return Number(rows[0]?.v ?? 0);
  }

  async scan(after: readonly [string, string] | undefined, limit: number): Promise<StoredOverride[]> {
    const { rows } = after
      ? await this.pool.query<OverrideRow>(
          `SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE (domain, key) > ($1, $2) AND NOT deleted ORDER BY domain, key LIMIT $3`,
          [after[0], after[1], limit],
        )
      : await this.pool.query<OverrideRow>(`SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE NOT deleted ORDER BY domain, key LIMIT $1`, [
          limit,
        ]);
    return rows.map((r) => rowToOverride(r, this.policies));
  }

  async changesSince(afterVersion: number, limit: number): Promise<ChangeBatch> {
    const { rows } = await this.pool.query<OverrideRow>(
      `SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE version > $1 ORDER BY version LIMIT $2`,
      [afterVersion, limit],
    );
    // The horizon is read after the rows: a purge in between can only make it look newer
    // (a needless reload), never hide a forgotten deletion.
    const h = await this.pool.query<{ value: string }>(`SELECT value FROM ratekeeper_meta WHERE name = 'horizon'`);
    return { changes: rows.map((r) => rowToChange(r, this.policies)), horizon: Number(h.rows[0]?.value ?? 0) };
  }

  /** At the earlier of `nowMs` and the database's clock: one instance's fast clock must not end overrides for all. */
  purge(nowMs: number, tombstoneRetentionMs: number): Promise<{ expired: number; tombstones: number }> {
    return this.write(async (c) => {
      const exp = await c.query<{ v: string | null; n: string; at: string }>(
        `WITH t AS (SELECT least($1::bigint, (extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS ms), x AS (
           UPDATE ratekeeper_overrides SET deleted = true, version = nextval('ratekeeper_overrides_version_seq'), updated_at_ms = $2
           WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= (SELECT ms FROM t) AND NOT deleted RETURNING version)
         SELECT max(version) AS v, count(*) AS n, (SELECT ms FROM t) AS at FROM x`,
        [nowMs, this.clock()],
      );
      const tomb = await c.query<{ v: string | null; n: string }>(
        `WITH x AS (DELETE FROM ratekeeper_overrides WHERE deleted AND updated_at_ms < $1 RETURNING version)
         SELECT max(version) AS v, count(*) AS n FROM x`,
        [Number(exp.rows[0]?.at ?? nowMs) - tombstoneRetentionMs],
      );
      const tv = tomb.rows[0]?.v;
      if (tv !== null && tv !== undefined) {
        await c.query(`UPDATE ratekeeper_meta SET value = greatest(value, $1) WHERE name = 'horizon'`, [tv]);
      }
      const expired = Number(exp.rows[0]?.n ?? 0);
      const ev = exp.rows[0]?.v;
      return {
        result: { expired, tombstones: Number(tomb.rows[0]?.n ?? 0) },
        notify: expired > 0 && ev ? { v: Number(ev), n: expired } : undefined,
      };
    });
  }

  watch(listener: (signal: ChangeSignal) => void | Promise<void>): () => void {
    return this.feed.watch(listener);
  }

  /** Whether the LISTEN connection is up (for readiness and metrics). */
  get listening(): boolean {
    return this.feed.listening;
  }

  /** Backend pid of the LISTEN connection while connected (for operations and tests). */
  get listenBackendPid(): number | undefined {
    return this.feed.listenBackendPid;
  }

  async close(): Promise<void> {
    this.feed.close();
    await this.pool.end();
  }
}

/** `url` with its password (user-info, and ?password= or ?sslpassword=, which pg reads too) as `***`, for logs and errors. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    for (const name of [...u.searchParams.keys()]) if (/password/i.test(name)) u.searchParams.set(name, "***");
    return u.toString();
  } catch {
    return "postgres://(unparsable URL)";
  }
}
