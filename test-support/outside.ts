/**
 * The one place that decides whether a test needing an outside program or server (redis-server,
 * nginx, PostgreSQL, chromium) runs, skips or fails:
 * - found (on PATH, never at a fixed path) or reachable: the tests run;
 * - missing, or nothing listening where a server should be: outside CI the tests skip, with ONE
 *   loud line per missing thing naming what to install; under CI=true they must run, so this
 *   throws instead (.ci/run installs everything).
 * A fresh clone on a bare machine therefore passes `npm ci && npm test` (scripts/bare-machine-test.sh
 * checks exactly that), and CI can never pass by skipping.
 */
import { accessSync, constants, statSync } from "node:fs";
import path from "node:path";

const reported = new Set<string>();

/**
 * The tests described by `what` cannot run because of `reason`. Under CI=true: throws. Otherwise
 * prints one loud line (once per `what` and process) naming `install`, and returns "skip".
 */
export function skipOrFail(what: string, reason: string, install: string): "skip" {
  if (process.env.CI === "true") {
    throw new Error(`${reason}, and CI=true: the ${what} tests must run under CI. Install ${install}.`);
  }
  if (!reported.has(what)) {
    reported.add(what);
    process.stderr.write(`\n!!! SKIPPING ${what} tests: ${reason}. Install ${install} to run them; under CI=true they fail instead.\n\n`);
  }
  return "skip";
}

/** Whether `file` is a regular file this process may execute. */
function isExecutable(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The absolute path of the first of `names` found in a PATH folder, or undefined. Never a fixed path. */
export function whichOnPath(names: string | readonly string[]): string | undefined {
  const list = typeof names === "string" ? [names] : names;
  const dirs = (process.env.PATH ?? "").split(path.delimiter).filter((d) => d !== "");
  for (const name of list) {
    for (const dir of dirs) {
      const at = path.join(dir, name);
      if (isExecutable(at)) return at;
    }
  }
  return undefined;
}

const found = new Map<string, string | undefined>();

/**
 * The absolute path of the first of `names` on PATH. When none is there: throws under CI=true;
 * otherwise one loud line ("SKIPPING <what> tests: <name> not found on PATH. Install <install>")
 * and undefined, so the caller skips.
 *
 * @example
 * const nginx = findBinary("nginx", "nginx", "nginx (apt-get install nginx-light; Debian puts it in /usr/sbin: have that on PATH)");
 * describe.skipIf(!nginx)("behind nginx", () => { ... });
 */
export function findBinary(names: string | readonly string[], what: string, install: string): string | undefined {
  const list = typeof names === "string" ? [names] : names;
  const key = list.join("|");
  if (found.has(key)) return found.get(key);
  const at = whichOnPath(list);
  if (at === undefined) skipOrFail(what, `${list.join(" / ")} not found on PATH`, install);
  found.set(key, at);
  return at;
}

/** What to install for each outside program, in one wording for every test and message. */
export const INSTALL = {
  redis: "redis-server and redis-cli >= 6.2 (Debian: apt-get install redis-server)",
  nginx: "nginx (Debian: apt-get install nginx-light; it lands in /usr/sbin, which must be on PATH)",
  chromium: "chromium (Debian: apt-get install chromium)",
  postgres:
    "PostgreSQL listening on 127.0.0.1:5432 with trust auth for user postgres (Debian: apt-get install postgresql), or set RATEKEEPER_TEST_PG_URL",
} as const;
