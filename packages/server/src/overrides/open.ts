import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { PostgresOverrideStore, type PostgresOverrideStoreOptions } from "./postgres.js";
import { SqliteOverrideStore } from "./sqlite.js";
import type { OverrideStore } from "./types.js";

/** Options passed through to the backend {@link openOverrideStore} picks. */
export interface OpenOverrideStoreOptions {
  /** Wall clock, ms since the epoch. @default Date.now */
  readonly clock?: () => number;
  /** SQLite: how often to look for other processes' writes, in ms. @default 1000 */
  readonly pollIntervalMs?: number;
  /** PostgreSQL: notification-connection events, for logs. */
  readonly onListenerEvent?: PostgresOverrideStoreOptions["onListenerEvent"];
  /** PostgreSQL: keepalive period of the LISTEN connection, in ms. @default 5000 */
  readonly keepaliveIntervalMs?: number;
  /**
   * SQLite: create the file (and its folder) when missing. `false` for a command that only reads
   * (`overrides export`): a mistyped path is then an error, not a new empty store. @default true
   */
  readonly create?: boolean;
}

/**
 * Opens the configuration store named by a URL, creating its schema when missing:
 * - `sqlite:./data/overrides.db` (relative to the working directory), `sqlite:/abs/file.db`,
 *   `sqlite:///abs/file.db`, or `sqlite::memory:`;
 * - `postgres://user:password@host:5432/db` (also `postgresql://`).
 * @throws RangeError naming `--overrides` for any other URL
 * @example const store = await openOverrideStore("sqlite:./data/overrides.db");
 */
export async function openOverrideStore(url: string, options: OpenOverrideStoreOptions = {}): Promise<OverrideStore> {
  if (url.startsWith("sqlite:")) {
    let path = url.slice("sqlite:".length);
    if (path.startsWith("//")) path = path.slice(2);
    if (path === "")
      throw new RangeError(`--overrides: a sqlite URL needs a file, e.g. sqlite:./data/overrides.db (got ${JSON.stringify(url)})`);
    if (options.create === false && path !== ":memory:" && !existsSync(resolve(path)))
      throw new RangeError(`--overrides: no such SQLite file ${resolve(path)} (nothing to read; check the path)`);
    return new SqliteOverrideStore({
      path: path === ":memory:" ? path : resolve(path),
      clock: options.clock,
      pollIntervalMs: options.pollIntervalMs,
    });
  }
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    return PostgresOverrideStore.open({
      connectionString: url,
      clock: options.clock,
      onListenerEvent: options.onListenerEvent,
      keepaliveIntervalMs: options.keepaliveIntervalMs,
    });
  }
  throw new RangeError(
    `--overrides: must be a sqlite: or postgres:// URL, e.g. sqlite:./data/overrides.db or postgres://user@host/db (got ${JSON.stringify(url)})`,
  );
}
