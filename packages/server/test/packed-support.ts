/**
 * What a user gets from the registry, built here: `npm pack` of both packages (prepack builds
 * them), then `npm install` of the two tarballs into an empty project, as a new user would.
 *
 * The project sits in the repository's .test-output/ (git-ignored), so that TypeScript finds the
 * type packages a consumer would have (@types/node, express, ...) by walking up, while Node
 * resolves ratekeeper and @ratekeeper/server from the project's own node_modules (the tests check
 * that). The install uses `--ignore-scripts`: the one install script among the dependencies is
 * better-sqlite3's native build (minutes; not what is tested, and only the SQLite overrides
 * store loads it). `--prefer-offline`: the npm cache that `npm ci` filled serves what it can.
 * Without the registry and without those packages in the cache, the tests skip loudly (fail under
 * CI=true), like any test whose outside server is missing.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { skipOrFail } from "../../../test-support/outside.js";
import { ROOT } from "./support.js";

/** An empty project with both packed packages installed. */
export interface PackedProject {
  dir: string;
  /** The tarballs, by package name. */
  tarballs: Record<string, string>;
  /** Runs `cmd args` in the project; throws with its output when it exits non-zero. */
  run(cmd: string, args: string[], env?: Record<string, string>): string;
  remove(): void;
}

export const PACKAGES = ["ratekeeper", "@ratekeeper/server"] as const;
const PACKAGE_DIRS: Record<(typeof PACKAGES)[number], string> = {
  ratekeeper: path.join(ROOT, "packages/ratekeeper"),
  "@ratekeeper/server": path.join(ROOT, "packages/server"),
};

/** Every subpath a package exports (package.json "exports"), as import specifiers. */
export function exportedSpecifiers(name: (typeof PACKAGES)[number]): string[] {
  const pkg = JSON.parse(readFileSync(path.join(PACKAGE_DIRS[name], "package.json"), "utf8")) as { exports: Record<string, unknown> };
  return Object.keys(pkg.exports)
    .filter((k) => !k.endsWith(".json"))
    .map((k) => (k === "." ? name : `${name}/${k.slice(2)}`));
}

function exec(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  return spawnSync(cmd, args, { cwd, encoding: "utf8", env: { ...process.env, ...env }, timeout: 600_000, maxBuffer: 64 << 20 });
}

function mustRun(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): string {
  const r = exec(cmd, args, cwd, env);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}) exited ${String(r.status)}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

const OFFLINE = /ENOTCACHED|EAI_AGAIN|ENOTFOUND|ECONNREFUSED|ENETUNREACH|ETIMEDOUT|network/i;

/**
 * Packs both packages and installs the tarballs into a fresh project. Undefined (after one loud
 * line) when npm cannot reach the registry for the dependencies; throws under CI=true.
 */
export function installPackedProject(label: string): PackedProject | undefined {
  const dir = path.join(ROOT, ".test-output", `${label}-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const tarballs: Record<string, string> = {};
  for (const name of PACKAGES) {
    const out = mustRun("npm", ["pack", "--json", "--pack-destination", dir], PACKAGE_DIRS[name]);
    const [info] = JSON.parse(out.slice(out.indexOf("["))) as { filename: string }[];
    tarballs[name] = path.join(dir, info!.filename);
  }
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }, null, 2));
  const install = exec(
    "npm",
    ["install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error", ...Object.values(tarballs)],
    dir,
  );
  if (install.status !== 0) {
    const output = `${install.stdout}\n${install.stderr}`;
    rmSync(dir, { recursive: true, force: true });
    if (OFFLINE.test(output)) {
      skipOrFail(
        "packed-tarball install",
        `npm install of the packed tarballs cannot reach the registry (${output.trim().split("\n").slice(-3).join(" ")})`,
        "network access to the npm registry, or a warm npm cache",
      );
      return undefined;
    }
    throw new Error(`npm install of the packed tarballs failed:\n${output}`);
  }
  return {
    dir,
    tarballs,
    run: (cmd, args, env) => mustRun(cmd, args, dir, env),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The TypeScript compiler of the repository, for typechecking consumers. */
export const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc");
