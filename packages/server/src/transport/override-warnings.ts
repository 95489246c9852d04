/**
 * What the admin API (and `ratekeeper overrides import --config`) says, beside an override it wrote, about
 * how the rules in force will treat it. It warns and never refuses: the rules change on reload.
 */
import { resolveLimits, type LimitSpec } from "ratekeeper";
import { matchDescriptor, type DescriptorEntry } from "../config/match.js";
import type { Rule, Rules } from "../config/rules.js";
import type { Override } from "../overrides/types.js";
import { boundedKey, descriptorKey, parseDescriptorKey } from "../service/descriptor-key.js";

/**
 * A warning when the override's limits could never admit one request of what its key costs: the
 * `cost` of the rule its key matches in its domain (the rule a check of that descriptor is decided
 * by, as the service matches it), and of the named policy its domain names, for a plain key (whether
 * a key is plain cannot be told from the key). Under such a rule or policy every check of the key
 * is denied (service/override.ts), except where the rule does not decide (`ruleExceptions`). None
 * for a block, an unlimited override, or limits the library refuses (the write refused them already).
 * @example overrideWarnings(rules, { domain: "d", key: "k=a", policy: { limits: [{ algorithm: "fixed-window", limit: 3, window: "1m" }] } })
 */
export function overrideWarnings(rules: Rules, o: Override): string[] {
  const entries = overrideEntries(o.key);
  const m = entries === undefined ? undefined : matchDescriptor(rules, o.domain, entries);
  const shared = m?.shared && boundedKey(descriptorKey(m.shared));
  // share_threshold: a descriptor is counted, and its override looked up, under the pattern's key only.
  const ignored = m?.rule !== undefined && shared !== undefined && shared !== o.key;
  const out = ignored && m.rule ? [neverApplies(m.rule.id, shared)] : [];
  if (typeof o.policy === "string") return out;
  let admits: number;
  try {
    admits = Math.min(...resolveLimits(o.policy.limits as LimitSpec[]).map((l) => l.capacity));
  } catch {
    return out;
  }
  const costly: { what: string; cost: number; when: string; except: string }[] = [];
  const rule = ignored ? undefined : m?.rule;
  if (rule !== undefined && rule.cost > admits)
    costly.push({ what: `rule ${rule.id}`, cost: rule.cost, when: "this key matches that rule, so", except: ruleExceptions(rules, rule) });
  const np = rules.policies.get(o.domain);
  if (np !== undefined && np.cost > admits)
    costly.push({ what: `policy ${np.name}`, cost: np.cost, when: "if this key is checked with that policy,", except: "" });
  return out.concat(
    costly.map(
      (c) =>
        `${c.what} costs ${c.cost} a request, more than this override could ever admit (at most ${admits}): ${c.when} every check of it is denied${c.except}`,
    ),
  );
}

/**
 * The checks of a key whose rule does not decide them, so its override applies at the client's
 * cost alone, not multiplied by the rule's (service/decide.ts): a descriptor sent with its own
 * limit (Envoy's route config; any domain the rules have), and, for a named, limited rule that
 * another rule of the domain `replaces`, a request with a descriptor matching that other rule
 * (service/replaces.ts). An unlimited rule is never replaced.
 */
function ruleExceptions(rules: Rules, rule: Rule): string {
  const name = rule.rlsName;
  const replacers =
    rule.unlimited || name === undefined || name === ""
      ? []
      : rules.rules.filter((r) => r.domain === rule.domain && r.replaces?.includes(name) === true).map((r) => r.id);
  const replaced = replacers.length > 0 ? ` or has another descriptor matching a rule that replaces it (${replacers.join(", ")})` : "";
  return `, except a check that sends a limit with the descriptor (Envoy's route config)${replaced}, which the override decides at the client's cost alone`;
}

/**
 * For a key its rule's share_threshold counts under `shared` (service/decide.ts): its override is
 * not looked up for a descriptor the rule decides; one sent with its own limit skips the rules, so
 * its override is looked up under its own key.
 */
function neverApplies(ruleId: string, shared: string): string {
  return `rule ${ruleId} shares one counter among the values matching its pattern (share_threshold): a descriptor of this key is counted, and its override looked up, under ${JSON.stringify(shared)}, so this override never applies to it, except to a check that sends a limit with the descriptor (Envoy's route config); write it for that key`;
}

/**
 * The descriptor whose override `key` is: the one the service looks it up for (descriptorKey of it
 * is `key`). parseDescriptorKey refuses an empty value (`k=`), yet descriptorKey writes a
 * descriptor with one so, and a rule of that key matches it: its override must be warned about too.
 */
function overrideEntries(key: string): DescriptorEntry[] | undefined {
  const parsed = parseDescriptorKey(key);
  if (parsed !== undefined || key.startsWith("|")) return parsed;
  const entries: DescriptorEntry[] = [];
  for (const part of key.split("|")) {
    const eq = part.indexOf("=");
    if (eq <= 0) return undefined;
    entries.push({ key: part.slice(0, eq), value: part.slice(eq + 1) });
  }
  return descriptorKey(entries) === key ? entries : undefined;
}
