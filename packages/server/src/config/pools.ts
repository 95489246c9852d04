/**
 * The rules file's concurrency limits (`concurrency:`): named pools of leases, each at most
 * `limit` holders per key at once over every service instance sharing the store, a lease living
 * `lease` (default 30s) after its acquire or last renew.
 *
 * ```yaml
 * concurrency:
 *   reports: { limit: 10, lease: 2m }    # POST /v1/leases/acquire {"pool": "reports", "key": "tenant:7"}
 *   uploads: { limit: 3 }
 * ```
 */
import { collectIssues, parseDuration, type ConfigIssue } from "ratekeeper";

/** A named concurrency limit, checked. */
export interface ConcurrencyPool {
  readonly name: string;
  readonly limit: number;
  readonly leaseMs: number;
}

/** Pool names: as policy names, kept short enough for the limiter's namespace (`p.<name>`, 64 at most). */
export const POOL_NAME_RE = /^[A-Za-z0-9_.:-]{1,60}$/;
const KNOWN = new Set(["limit", "lease"]);

/**
 * Checks the `concurrency` section (already known to be an object of objects, by name) and
 * compiles it; every problem goes to `issues` with its path.
 */
export function compilePools(
  raw: Record<string, Record<string, unknown>> | undefined,
  issues: ConfigIssue[],
): Map<string, ConcurrencyPool> {
  const pools = new Map<string, ConcurrencyPool>();
  for (const [name, r] of Object.entries(raw ?? {})) {
    const path = `concurrency.${name}`;
    const before = issues.length;
    if (!POOL_NAME_RE.test(name)) issues.push({ path, message: "pool names must be 1-60 letters, digits, '_', '.', ':' or '-'" });
    for (const k of Object.keys(r)) {
      if (!KNOWN.has(k)) issues.push({ path: `${path}.${k}`, message: "unknown key (known: limit, lease)" });
    }
    const limit = r.limit;
    if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1 || limit > 1_000_000) {
      issues.push({ path: `${path}.limit`, message: `must be a whole number of leases from 1 to 1000000 (got ${JSON.stringify(limit)})` });
    }
    const leaseMs = collectIssues(issues, () => parseDuration(r.lease ?? "30s", `${path}.lease`));
    if (issues.length === before) pools.set(name, { name, limit: limit as number, leaseMs: leaseMs as number });
  }
  return pools;
}
