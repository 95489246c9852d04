/**
 * The decision service started inside the test process (`startService`, no child process), for
 * tests that look at one transport's answers: free loopback ports, the rules from a YAML string
 * written to a temp file, no file watch, no dashboard, a silent log, unless `options` say otherwise.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createLogger } from "../src/log.js";
import { startService, type RunningService, type ServeOptions } from "../src/server.js";

/** A service started by {@link serveRules}. */
export interface InProcessService extends RunningService {
  /** The rules file it reads. */
  readonly file: string;
}

/**
 * Starts the service on `rules` (YAML text). `close()` stops it and removes its temp directory.
 * @example const svc = await serveRules("domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n");
 */
export async function serveRules(rules: string, options: Partial<ServeOptions> = {}): Promise<InProcessService> {
  const dir = mkdtempSync(path.join(tmpdir(), "rk-in-process-"));
  const file = path.join(dir, "rules.yaml");
  writeFileSync(file, rules);
  try {
    const svc = await startService({
      configFile: file,
      port: 0,
      grpcPort: 0,
      host: "127.0.0.1",
      watch: false,
      dashboard: false,
      logger: createLogger("silent"),
      ...options,
    });
    return {
      ...svc,
      file,
      close: async () => {
        await svc.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

/**
 * Waits, when a clock-aligned minute is about to end, until the next one has begun. Tests that
 * count requests in envoyproxy/ratelimit's minute windows (`unit: minute`, aligned on the clock)
 * call it before their first request: a window ending in the middle of a file would reset the
 * counts it asserts. `budgetMs`: how long the file's requests take at most.
 */
export async function clearOfMinuteEdge(budgetMs = 10_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < budgetMs) await new Promise((r) => setTimeout(r, left + 50));
}
