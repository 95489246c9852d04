/**
 * The files of the SQLite overrides store (sqlite.ts), as opened: the database and, in WAL mode,
 * its write-ahead log and shared-memory index beside it (`-wal`, `-shm`), each by device and
 * inode, so a write can tell when a name no longer leads to the file SQLite has open.
 *
 * Why each matters (tried, with the store on a file):
 * - the database deleted or replaced: SQLite goes on writing to the open, nameless file; writes
 *   are answered as done and lost at the next start (a process opening the name meanwhile, an
 *   import, gets another file);
 * - the -wal deleted, a write answered as done, then the process killed: on reopening, every
 *   change since the last checkpoint was gone (those made before the deletion too);
 * - the -shm deleted, then another process (an import) wrote: its write was lost at the
 *   service's next one (each had a wal-index of its own); with the -wal deleted and another
 *   process opening the database, even a clean close lost them.
 * Both side files exist from the first transaction until the last connection closes (ours holds
 * them for its life), so neither goes away on its own while the store is open.
 */
import { realpathSync, statSync } from "node:fs";

/** SQLite's files beside the database in WAL mode, and what each is. */
const SIDECARS = [
  ["-wal", "write-ahead log"],
  ["-shm", "shared-memory index"],
] as const;

interface FileId {
  readonly dev: number;
  readonly ino: number;
}

interface Sidecar extends FileId {
  /** Where it is: beside the database's real file (symlinks followed). */
  readonly path: string;
  readonly what: string;
}

/** The database file at `path` (absolute) and its side files, as opened. */
export interface OpenedDatabase extends FileId {
  readonly path: string;
  readonly sidecars: readonly Sidecar[];
}

/**
 * A write refused because the database's file, or its -wal or -shm, was deleted or replaced while
 * open. Its message names the file; a client is told only the kind (service/store-failure.ts).
 */
export class DatabaseFileGoneError extends Error {
  override readonly name = "DatabaseFileGoneError";
  /**
   * @param advice what a client is told (service/store-failure.ts), in words with no path: the
   *   operator writing overrides must learn it too, above all that a restart loses every override
   */
  constructor(
    message: string,
    readonly advice: string,
  ) {
    super(message);
  }
}

/**
 * Records the files of the database opened at `path` (absolute), after its first transaction. The
 * side files are where SQLite keeps them: beside the file `path` leads to, symlinks followed
 * (beside a symlink there are none: none was recorded, and deleting the real -wal went unseen).
 */
export function openedDatabase(path: string): OpenedDatabase {
  const st = statSync(path);
  const real = realpathSync(path);
  const sidecars: Sidecar[] = [];
  for (const [suffix, what] of SIDECARS) {
    const at = `${real}${suffix}`;
    const s = statSync(at, { throwIfNoEntry: false });
    if (s !== undefined) sidecars.push({ path: at, what, dev: s.dev, ino: s.ino });
  }
  return { path, dev: st.dev, ino: st.ino, sidecars };
}

const same = (st: FileId | undefined, id: FileId): boolean => st !== undefined && st.dev === id.dev && st.ino === id.ino;

/**
 * Throws when the database file, or one of its side files, was deleted or replaced while open (a
 * write now would be lost: see above). Three stats per write.
 */
export function checkAttached(o: OpenedDatabase): void {
  const st = statSync(o.path, { throwIfNoEntry: false });
  if (same(st, o)) {
    for (const c of o.sidecars) {
      if (!same(statSync(c.path, { throwIfNoEntry: false }), c)) throw sidecarGone(c.path, c.what);
    }
    return;
  }
  // Deleted: a restart would make an empty database there, without the overrides (blocks) it held.
  const none = st === undefined ? " (nothing is there now: a restart would start from an empty database, every override gone)" : "";
  throw new DatabaseFileGoneError(
    `the SQLite file ${o.path} was deleted or replaced while open: a write now would be lost (it would go to the old file). Restore the file, or restart the service to open the one now there${none}`,
    st === undefined
      ? "its file was deleted while open and nothing is there now: restore it; a restart would start from an empty database, every override gone"
      : "its file was deleted or replaced while open: restore it, or restart the service to open the one now there",
  );
}

/** The error of a write refused because the database's -wal or -shm (at `path`) was deleted or replaced while open. */
function sidecarGone(path: string, what: string): Error {
  return new DatabaseFileGoneError(
    `the SQLite file ${path} (its ${what}) was deleted or replaced while open: a write now could be lost (at a crash, or when another process, an import, opens the database). ` +
      "Stop any other process using the database, then restart the service: its clean close writes what the old log holds into the database file",
    "its write-ahead log or shared-memory index was deleted or replaced while open: stop any other process using the database, then restart the service",
  );
}
