/**
 * The SQLite override store (the embedded default): versioned writes with tombstones, the change
 * feed, paging and purge, on one better-sqlite3 handle. Its schema, migrations and prepared
 * statements are in sqlite-schema.ts; rows.ts holds what it shares with the PostgreSQL store.
 */
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import { checkAttached, openedDatabase, type OpenedDatabase } from "./sqlite-files.js";
import { makeFolder } from "../make-folder.js";
import { serializePolicy } from "./schema.js";
import { PolicyInterner, decodeCursor, encodeCursor, pageSize, rowToChange, rowToOverride, type OverrideRow } from "./rows.js";
import { COLUMNS, migrate, prepareStatements, type RawRow, type Statements } from "./sqlite-schema.js";
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

/** Options for {@link SqliteOverrideStore}. */
export interface SqliteOverrideStoreOptions {
  /** The database file (created with its folder when missing), or `":memory:"`. */
  readonly path: string;
  /**
   * How often to look for writes made by another process (e.g. `ratekeeper overrides import`)
   * while someone watches, in ms. Writes through this store are signalled at once.
   * @default 1000
   */
  readonly pollIntervalMs?: number;
  /** Wall clock for `updatedAtMs`, ms since the epoch. @default Date.now */
  readonly clock?: () => number;
}

/**
 * The embedded default configuration store: one SQLite file (WAL mode), no server, survives
 * restarts. Writes are serialised by SQLite, so the version counter in `ratekeeper_meta` gives
 * the change feed in commit order.
 * @example
 * const store = new SqliteOverrideStore({ path: "./data/overrides.db" });
 * await store.put({ domain: "api", key: "user_id=241531", policy: { limits: [{ algorithm: "fixed-window", limit: 5, window: "1s" }] } });
 */
export class SqliteOverrideStore implements OverrideStore {
  readonly kind = "sqlite" as const;
  readonly description: string;
  private readonly db: Database.Database;
  private readonly clock: () => number;
  private readonly pollIntervalMs: number;
  private readonly policies = new PolicyInterner();
  private readonly listeners = new Set<(s: ChangeSignal) => void | Promise<void>>();
  private pollTimer: NodeJS.Timeout | undefined;
  private lastSignalled = 0;
  private readonly stmt: Statements;
  /** The files opened (sqlite-files.ts), to tell when their names no longer lead to them; undefined in memory. */
  private readonly opened: OpenedDatabase | undefined;

  constructor(options: SqliteOverrideStoreOptions) {
    this.description = `sqlite:${options.path}`;
    this.clock = options.clock ?? Date.now;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    // better-sqlite3 takes "" as well as ":memory:" for a database of no file.
    const anonymous = options.path === "" || options.path === ":memory:";
    if (!anonymous) makeFolder(dirname(options.path));
    this.db = new Database(options.path);
    // WAL: readers (another process exporting) do not block the writer; busy_timeout: a second
    // process importing waits for the lock instead of failing at once.
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("busy_timeout = 5000");
    this.db.pragma("synchronous = NORMAL");
    migrate(this.db);
    this.stmt = prepareStatements(this.db);
    this.lastSignalled = this.versionNow();
    if (!anonymous) {
      // Absolute, as SQLite made it on opening: a relative name would stat another file once
      // the working directory changes (an embedding app's chdir), refusing every write.
      const path = resolve(options.path);
      this.opened = openedDatabase(path);
    }
  }

  /** Throws when the file, its -wal or its -shm was deleted or replaced while open (sqlite-files.ts). */
  private attached(): void {
    if (this.opened !== undefined) checkAttached(this.opened);
  }

  private versionNow(): number {
    return this.stmt.version.get()?.value ?? 0;
  }

  private write(o: Override, version: number, nowMs: number): StoredOverride {
    this.stmt.upsert.run(o.domain, o.key, serializePolicy(o.policy), o.expiresAtMs ?? null, o.note ?? null, version, nowMs);
    return { ...o, version, updatedAtMs: nowMs };
  }

  private nextVersion(n = 1): number {
    return (this.stmt.bump.get(n) as { value: number }).value;
  }

  /** Tells the listeners; resolves when the promises they return settle (read-your-writes). */
  private signal(version: number): Promise<void> {
    if (version > this.lastSignalled) this.lastSignalled = version;
    const pending: Promise<void>[] = [];
    for (const l of this.listeners) {
      try {
        const r = l({ version });
        if (r) pending.push(r.catch(() => undefined));
      } catch {
        // A subscriber's failure must not fail the write, which is committed.
      }
    }
    return pending.length === 0 ? Promise.resolve() : Promise.all(pending).then(() => undefined);
  }

  // better-sqlite3 is synchronous and throws; every method turns that into a rejected promise.
  get(domain: string, key: string): Promise<StoredOverride | undefined> {
    return promised(() => {
      const row = this.stmt.get.get(domain, key);
      return row ? rowToOverride(row, this.policies) : undefined;
    });
  }

  async create(override: Override, nowMs: number): Promise<StoredOverride> {
    this.attached();
    const out = this.db
      .transaction(() => {
        const row = this.stmt.get.get(override.domain, override.key);
        if (row && (row.expires_at_ms === null || Number(row.expires_at_ms) > nowMs))
          throw new OverrideConflictError(override.domain, override.key);
        return this.write(override, this.nextVersion(), this.clock());
      })
      .immediate();
    await this.signal(out.version);
    return out;
  }

  async update(override: Override): Promise<StoredOverride | undefined> {
    this.attached();
    const out = this.db
      .transaction(() => {
        if (!this.stmt.get.get(override.domain, override.key)) return undefined;
        return this.write(override, this.nextVersion(), this.clock());
      })
      .immediate();
    if (out) await this.signal(out.version);
    return out;
  }

  async put(override: Override): Promise<StoredOverride> {
    this.attached();
    const out = this.db.transaction(() => this.write(override, this.nextVersion(), this.clock())).immediate();
    await this.signal(out.version);
    return out;
  }

  async putMany(overrides: readonly Override[]): Promise<number> {
    this.attached();
    if (overrides.length === 0) return 0;
    const last = this.db
      .transaction(() => {
        const top = this.nextVersion(overrides.length);
        let v = top - overrides.length;
        const nowMs = this.clock();
        for (const o of overrides) this.write(o, ++v, nowMs);
        return top;
      })
      .immediate();
    await this.signal(last);
    return overrides.length;
  }

  async delete(domain: string, key: string, onlyPolicy?: "blocked" | "unlimited"): Promise<boolean> {
    this.attached();
    const version = this.db
      .transaction(() => {
        const row = this.stmt.get.get(domain, key);
        if (!row || (onlyPolicy !== undefined && row.policy !== onlyPolicy)) return 0;
        const v = this.nextVersion();
        this.stmt.tombstone.run(v, this.clock(), domain, key);
        return v;
      })
      .immediate();
    if (version > 0) await this.signal(version);
    return version > 0;
  }

  list(options: ListOverridesOptions = {}): Promise<OverridePage> {
    return promised(() => this.listNow(options));
  }

  private listNow(options: ListOverridesOptions): OverridePage {
    const limit = pageSize(options.limit);
    const where: string[] = ["deleted = 0"];
    const args: (string | number)[] = [];
    if (options.domain !== undefined) {
      where.push("domain = ?");
      args.push(options.domain);
    }
    if (options.keyPrefix !== undefined && options.keyPrefix !== "") {
      // The range keeps the primary key usable; substr checks the prefix exactly (BINARY collation).
      where.push("key >= ? AND substr(key, 1, ?) = ?");
      // substr counts characters (code points), not UTF-16 units: an emoji is 1 there, 2 in .length.
      args.push(options.keyPrefix, Array.from(options.keyPrefix).length, options.keyPrefix);
    }
    if (options.liveAtMs !== undefined) {
      where.push("(expires_at_ms IS NULL OR expires_at_ms > ?)");
      args.push(options.liveAtMs);
    }
    if (options.cursor !== undefined) {
      const [d, k] = decodeCursor(options.cursor);
      where.push("(domain, key) > (?, ?)");
      args.push(d, k);
    }
    const rows = this.db
      .prepare<(string | number)[], OverrideRow>(
        `SELECT ${COLUMNS} FROM ratekeeper_overrides WHERE ${where.join(" AND ")} ORDER BY domain, key LIMIT ?`,
      )
      .all(...args, limit + 1);
    const more = rows.length > limit;
    const items = rows.slice(0, limit).map((r) => rowToOverride(r, this.policies));
    const lastItem = items[items.length - 1];
    return { items, nextCursor: more && lastItem ? encodeCursor(lastItem.domain, lastItem.key) : undefined };
  }

  currentVersion(): Promise<number> {
    return promised(() => this.versionNow());
  }

  scan(after: readonly [string, string] | undefined, limit: number): Promise<StoredOverride[]> {
    return promised(() => {
      // Raw arrays (in COLUMNS order) rather than objects: half the cost when loading a million rows.
      const rows = (after ? this.stmt.scanAfter.all(after[0], after[1], limit) : this.stmt.scanFirst.all(limit)) as RawRow[];
      const out: StoredOverride[] = new Array<StoredOverride>(rows.length);
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i] as RawRow;
        out[i] = {
          domain: r[0],
          key: r[1],
          policy: this.policies.get(r[2]),
          expiresAtMs: r[3] ?? undefined,
          note: r[4] ?? undefined,
          version: r[5],
          updatedAtMs: r[6],
        };
      }
      return out;
    });
  }

  changesSince(afterVersion: number, limit: number): Promise<ChangeBatch> {
    // One read transaction, so the horizon and the rows agree.
    return promised(() =>
      this.db.transaction(() => {
        const rows = this.stmt.changes.all(afterVersion, limit);
        const horizon = this.stmt.horizon.get()?.value ?? 0;
        return { changes: rows.map((r) => rowToChange(r, this.policies)), horizon };
      })(),
    );
  }

  async purge(nowMs: number, tombstoneRetentionMs: number): Promise<{ expired: number; tombstones: number }> {
    this.attached();
    const result = this.db
      .transaction(() => {
        const expiredRows = this.stmt.expired.all(nowMs);
        let v = expiredRows.length > 0 ? this.nextVersion(expiredRows.length) - expiredRows.length : 0;
        const at = this.clock();
        for (const r of expiredRows) this.stmt.tombstone.run(++v, at, r.domain, r.key);
        const cutoff = nowMs - tombstoneRetentionMs;
        const old = this.stmt.oldTombstones.get(cutoff);
        if (old && old.n > 0 && old.v !== null) {
          this.stmt.setHorizon.run(old.v);
          this.stmt.dropTombstones.run(cutoff);
        }
        return { expired: expiredRows.length, tombstones: old?.n ?? 0, version: v };
      })
      .immediate();
    const counts = { expired: result.expired, tombstones: result.tombstones };
    if (result.expired > 0) await this.signal(result.version);
    return counts;
  }

  watch(listener: (signal: ChangeSignal) => void | Promise<void>): () => void {
    this.listeners.add(listener);
    if (!this.pollTimer) {
      // Another process (an import) may write to the file: look at the version counter now and then.
      this.pollTimer = setInterval(() => {
        try {
          const v = this.versionNow();
          if (v !== this.lastSignalled) void this.signal(v);
        } catch {
          // A busy or closed database: the next tick tries again.
        }
      }, this.pollIntervalMs);
      this.pollTimer.unref();
    }
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0 && this.pollTimer) {
        clearInterval(this.pollTimer);
        this.pollTimer = undefined;
      }
    };
  }

  close(): Promise<void> {
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = undefined;
    this.listeners.clear();
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }
}

/** Runs a synchronous database call, turning a throw into a rejected promise. */
function promised<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e instanceof Error ? e : new Error(String(e)));
  }
}
