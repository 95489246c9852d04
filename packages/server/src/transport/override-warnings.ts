/**
 * What the admin API says, beside the override it wrote, about how the rules in force will treat
 * it. It warns and never refuses: the rules change on reload, and a warning may not apply to the
 * override's key at all (a rule of its domain that the key does not match).
 */
import { resolveLimits, type LimitSpec } from "ratekeeper";
import type { Rules } from "../config/rules.js";
import type { Override } from "../overrides/types.js";

/**
 * A warning for each rule of the override's domain (and the named policy its domain names, for
 * plain keys) whose `cost` per request is more than the override's limits could ever admit: under
 * that rule every check of the key would be denied (service/override.ts). None for a block, an
 * unlimited override, or limits the library refuses (the write refused them already).
 * @example overrideWarnings(rules, { domain: "d", key: "k=a", policy: { limits: [{ algorithm: "fixed-window", limit: 3, window: "1m" }] } })
 */
export function overrideWarnings(rules: Rules, o: Override): string[] {
  if (typeof o.policy === "string") return [];
  let admits: number;
  try {
    admits = Math.min(...resolveLimits(o.policy.limits as LimitSpec[]).map((l) => l.capacity));
  } catch {
    return [];
  }
  const costly: { what: string; cost: number; when: string }[] = [];
  for (const r of rules.rules)
    if (r.domain === o.domain && r.cost > admits) costly.push({ what: `rule ${r.id}`, cost: r.cost, when: "matches that rule" });
  const np = rules.policies.get(o.domain);
  if (np !== undefined && np.cost > admits) costly.push({ what: `policy ${np.name}`, cost: np.cost, when: "is checked with that policy" });
  return costly.map(
    (c) =>
      `${c.what} costs ${c.cost} a request, more than this override could ever admit (at most ${admits}): if this key ${c.when}, every check of it is denied`,
  );
}
