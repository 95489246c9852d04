import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { PostgresOverrideStore, redactUrl, type PostgresOverrideStoreOptions } from "./postgres.js";
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
 * The configuration store named by `--overrides` could not be opened (PostgreSQL unreachable, a
 * database that does not exist, a refused login, a SQLite file that cannot be created). Its
 * message names the flag, the store (password removed), the cause and what to check; the
 * command line prints it without a stack and exits 1.
 */
export class OverrideStoreOpenError extends Error {
  constructor(where: string, cause: unknown) {
    const c = cause as Error & { code?: string };
    super(`--overrides ${where}: cannot open the overrides store: ${c.message}${hintFor(c.code)}`, { cause });
    this.name = "OverrideStoreOpenError";
  }
}

/** What to check, by the error's code (Node's for the network and files, PostgreSQL's SQLSTATE). */
function hintFor(code: string | undefined): string {
  switch (code ?? "") {
    case "ECONNREFUSED":
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "ETIMEDOUT":
    case "EHOSTUNREACH":
      return " (is PostgreSQL running, and does the URL name its host and port?)";
    case "3D000":
      return " (create the database first, e.g. createdb NAME, or name an existing one in the URL)";
    case "28000":
    case "28P01":
      return " (the server refused this user or password: check the URL's user and password, and pg_hba.conf)";
    case "EACCES":
    case "EPERM":
    case "EROFS":
    case "ENOENT":
    case "ENOTDIR":
    case "SQLITE_CANTOPEN":
      return " (check that the file's folder exists or can be created, and is writable by this user)";
    default:
      return "";
  }
}

/** Runs `open`, turning its failure into an {@link OverrideStoreOpenError} naming `where`. */
async function opening<T>(where: string, open: () => T | Promise<T>): Promise<T> {
  try {
    return await open();
  } catch (e) {
    throw new OverrideStoreOpenError(where, e);
  }
}

/**
 * Opens the configuration store named by a URL, creating its schema when missing:
 * - `sqlite:./data/overrides.db` (relative to the working directory), `sqlite:/abs/file.db`,
 *   `sqlite:///abs/file.db`, or `sqlite::memory:`;
 * - `postgres://user:password@host:5432/db` (also `postgresql://`).
 * @throws RangeError naming `--overrides` for any other URL; OverrideStoreOpenError when the store named cannot be opened
 * @example const store = await openOverrideStore("sqlite:./data/overrides.db");
 */
export async function openOverrideStore(url: string, options: OpenOverrideStoreOptions = {}): Promise<OverrideStore> {
  checkOverridesUrl(url);
  if (url.startsWith("sqlite:")) {
    const path = sqlitePath(url);
    if (options.create === false && path !== ":memory:" && !existsSync(resolve(path)))
      throw new RangeError(`--overrides: no such SQLite file ${resolve(path)} (nothing to read; check the path)`);
    const file = path === ":memory:" ? path : resolve(path);
    return opening(
      `sqlite:${file}`,
      () => new SqliteOverrideStore({ path: file, clock: options.clock, pollIntervalMs: options.pollIntervalMs }),
    );
  }
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    return opening(redactUrl(url), () =>
      PostgresOverrideStore.open({
        connectionString: url,
        clock: options.clock,
        onListenerEvent: options.onListenerEvent,
        keepaliveIntervalMs: options.keepaliveIntervalMs,
      }),
    );
  }
  throw new Error("unreachable: checkOverridesUrl let an unknown URL through");
}

/** The file of a `sqlite:` URL (`sqlite:///abs` is `/abs`). */
function sqlitePath(url: string): string {
  const path = url.slice("sqlite:".length);
  return path.startsWith("//") ? path.slice(2) : path;
}

/**
 * Checks the form of an `--overrides` URL, opening nothing (`serve` checks it with its other
 * flags, before it writes anything).
 * @throws RangeError naming `--overrides` unless it is a `sqlite:` URL with a file or a `postgres://` one
 */
export function checkOverridesUrl(url: string): void {
  if (url.startsWith("sqlite:")) {
    if (sqlitePath(url) === "")
      throw new RangeError(`--overrides: a sqlite URL needs a file, e.g. sqlite:./data/overrides.db (got ${JSON.stringify(url)})`);
    return;
  }
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) return;
  throw new RangeError(
    `--overrides: must be a sqlite: or postgres:// URL, e.g. sqlite:./data/overrides.db or postgres://user@host/db (got ${JSON.stringify(url)})`,
  );
}
