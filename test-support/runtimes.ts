/**
 * The other JavaScript runtimes the edge tests run the Hono example on: Deno and Bun (the `deno`
 * and `bun` npm packages, devDependencies, which ship the binaries) and workerd, Cloudflare
 * Workers' runtime (through `miniflare`, which brings `workerd`). Found in this repository's
 * node_modules first, then on PATH. Missing: one loud line naming what to install, and the tests
 * skip; under CI=true they fail instead (after `npm ci` they are always there).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const found = new Map<string, string | undefined>();

function missing(what: string, install: string): undefined {
  if (process.env.CI === "true") throw new Error(`${what} is not available, and CI=true: these tests must run under CI. ${install}.`);
  process.stderr.write(`\n!!! ${what} is not available: SKIPPING its edge-runtime tests. ${install} to run them.\n\n`);
  return undefined;
}

/** Whether `bin --version` runs. */
function runs(bin: string): boolean {
  const r = spawnSync(bin, ["--version"], { stdio: "ignore", timeout: 30_000 });
  return r.status === 0 && r.error === undefined;
}

/**
 * The path of the `deno` or `bun` binary: `node_modules/.bin/<name>` (from npm), else `<name>` on
 * PATH; undefined (with a loud line) when neither runs.
 */
export function runtimeBinary(name: "deno" | "bun"): string | undefined {
  if (found.has(name)) return found.get(name);
  const local = path.join(ROOT, "node_modules", ".bin", name);
  const bin = existsSync(local) && runs(local) ? local : runs(name) ? name : undefined;
  found.set(name, bin ?? missing(name, `Run npm ci (the "${name}" devDependency ships it) or install ${name}`));
  return found.get(name);
}

/** `miniflare`'s module when it and its workerd binary load, else undefined (with a loud line). */
export async function loadMiniflare(): Promise<typeof import("miniflare") | undefined> {
  try {
    const mf = await import("miniflare");
    const workerd = path.join(ROOT, "node_modules", ".bin", "workerd");
    if (existsSync(workerd) && !runs(workerd)) throw new Error(`${workerd} does not run`);
    return mf;
  } catch (e) {
    return missing(`miniflare/workerd (${(e as Error).message})`, 'Run npm ci (the "miniflare" devDependency brings workerd)');
  }
}
