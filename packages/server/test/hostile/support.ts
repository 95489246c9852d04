/**
 * Helpers for the hostile suite: find an outside binary on PATH (skip loudly without it, fail
 * under CI=true), and plain HTTP requests sent from a chosen loopback source address, so that
 * one test can play an attacker and a victim with different client addresses.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { request } from "node:http";
import path from "node:path";

const found = new Map<string, string | undefined>();

/**
 * The absolute path of `name` on PATH (or in /usr/sbin and /sbin, where Debian puts nginx and
 * PostgreSQL's tools for root), or undefined with one loud line naming what to install. Under
 * CI=true a missing binary throws: those tests must run there.
 */
export function findBinary(name: string, install: string): string | undefined {
  if (found.has(name)) return found.get(name);
  const dirs = [...(process.env.PATH ?? "").split(path.delimiter), "/usr/sbin", "/sbin", "/usr/local/sbin"];
  let at: string | undefined;
  for (const d of dirs) {
    if (d && existsSync(path.join(d, name))) {
      at = path.join(d, name);
      break;
    }
  }
  if (at === undefined) {
    if (process.env.CI === "true")
      throw new Error(`${name} not found on PATH, and CI=true: these tests must run under CI. Install ${install}.`);
    process.stderr.write(`\n!!! ${name} not found on PATH: SKIPPING its hostile tests. Install ${install} to run them.\n\n`);
  }
  found.set(name, at);
  return at;
}

/** Whether a command answers (`cmd --version` style probe). */
export function runs(cmd: string, args: string[]): boolean {
  try {
    execFileSync(cmd, args, { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** A response, read whole. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * GET `http://127.0.0.1:<port><pathAndQuery>` from source address `from` (any 127.0.0.0/8
 * address works on Linux loopback), with the given request headers. The path is sent exactly
 * as given (no normalisation), as a hostile client would.
 */
export function getFrom(from: string, port: number, pathAndQuery: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: pathAndQuery, localAddress: from, headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}
