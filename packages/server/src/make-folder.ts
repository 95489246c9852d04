/**
 * `mkdir -p` that always returns. Node's own (`mkdir(dir, { recursive: true })`) never returns
 * when a parent exists but answers ENOENT for any child (a path under /proc or /sys, a stale
 * mount): it takes ENOENT for "parent missing", makes the parent (EEXIST: fine) and tries again,
 * forever; the synchronous form at 100% CPU with the event loop blocked, so not even SIGTERM is
 * heard (a Node.js bug, seen with `--overrides sqlite:/proc/x/overrides.db`). Here each missing
 * folder is made once, from the top down, and the first failure is thrown as is.
 */
import { existsSync, mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Makes `dir` and its missing parents.
 * @throws the first `mkdir` error (ENOENT, EACCES, ENOTDIR, EEXIST for a dangling symlink...)
 * @example makeFolder("./data");
 */
export function makeFolder(dir: string): void {
  const missing: string[] = [];
  for (let d = dir; !existsSync(d); d = dirname(d)) {
    missing.push(d);
    if (dirname(d) === d) break; // a root that does not exist: mkdir says why
  }
  for (let i = missing.length - 1; i >= 0; i--) made(missing[i] as string);
}

/**
 * mkdir of one folder. EEXIST for a folder there now is fine: another process made it since we
 * looked (two services starting at once on a fresh ./data), as Node's recursive mkdir allowed.
 * EEXIST for anything else (a file, a dangling symlink) is thrown.
 */
function made(dir: string): void {
  try {
    mkdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST" || statSync(dir, { throwIfNoEntry: false })?.isDirectory() !== true) throw e;
  }
}
