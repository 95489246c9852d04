/**
 * The stat keys envoyproxy/ratelimit counts each limit's hits under (src/config/config_impl.go,
 * src/stats/manager_impl.go), for its per-limit stats (metrics/envoy-stats.ts):
 * - a rule: its path in the rules, `<domain>.<key>[_<value>]...` with the values as written
 *   (a wildcard as its pattern), e.g. `api.path_/search*.user`. Bounded by the rules, and the
 *   same for every request, so computed once per rule;
 * - a `detailed_metric` rule, and a descriptor carrying its own limit: the request's entries,
 *   e.g. `api.user_42`; a path through `value_to_metric` nodes: the request's value at those
 *   (`valued`: the metrics cap how many such keys they keep).
 * Sanitised as its `SanitizeStatName`: ':' and '|' become '_', and so do the dots of IPv4
 * addresses.
 */
import type { Decision } from "ratekeeper";
import type { DescriptorEntry } from "../config/match.js";
import { boundedKey } from "./descriptor-key.js";
import type { Rule } from "../config/rules.js";
import type { LimitStatKey } from "./types.js";

const RULE_KEYS = new WeakMap<Rule, LimitStatKey>();
const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g;
/** The last rule `ruleStatKey` looked up, and its key (held until another rule is looked up). */
let lastRule: Rule | undefined;
let lastRuleKey: LimitStatKey | undefined;

/** envoyproxy/ratelimit's `SanitizeStatName`. */
export function sanitizeStatName(s: string): string {
  return s.replace(/[:|]/g, "_").replace(IPV4, (ip) => ip.replace(/\./g, "_"));
}

/**
 * A matched rule's stat key. `via` is the match path (`["path=/api", "user"]`); `entries` the
 * request's (or, with `share_threshold`, the entries counted under their patterns);
 * `valueToMetric` the levels whose node has `value_to_metric` (there the request's value is in
 * the key, as its GetLimit builds it); `shared` whether `entries` are the share_threshold ones.
 */
export function ruleStatKey(
  rule: Rule,
  via: readonly string[],
  entries: readonly DescriptorEntry[],
  valueToMetric?: readonly boolean[],
  shared = false,
): LimitStatKey {
  // With share_threshold patterns its GetLimit builds the key another way: an empty value as `key`.
  if (rule.detailedMetric === true) return valuedStatKey(rule.domain, entries, rule.shadow, !shared);
  if (valueToMetric !== undefined) {
    let key = rule.domain;
    via.forEach((label, i) => {
      const e = entries[i];
      key += `.${valueToMetric[i] === true && e !== undefined ? (e.value === "" ? e.key : `${e.key}_${e.value}`) : label.replace("=", "_")}`;
    });
    return { key: sanitizeStatName(boundedKey(key)), domain: rule.domain, valued: true, shadow: rule.shadow };
  }
  // Consecutive checks mostly match the same rule: compared before the WeakMap lookup.
  if (rule === lastRule && lastRuleKey !== undefined) return lastRuleKey;
  let k = RULE_KEYS.get(rule);
  if (k === undefined) {
    // A node's label is `key` or `key=value`; a key never holds '='.
    const path = via.map((label) => label.replace("=", "_")).join(".");
    RULE_KEYS.set(rule, (k = { key: sanitizeStatName(`${rule.domain}.${path}`), domain: rule.domain, valued: false, shadow: rule.shadow }));
  }
  lastRule = rule;
  lastRuleKey = k;
  return k;
}

/**
 * The stat key of a request's own entries (`detailed_metric`, a descriptor's own limit), as its
 * GetLimit builds each: `key_value` per entry, an empty value written `key_` for `detailed_metric`
 * (`detailed`) and `key` for a descriptor's own limit. `domain` labels its overflow.
 */
export function valuedStatKey(domain: string, entries: readonly DescriptorEntry[], shadow = false, detailed = false): LimitStatKey {
  let key = domain;
  for (const e of entries) key += e.value === "" && !detailed ? `.${e.key}` : `.${e.key}_${e.value}`;
  // Bounded: the metrics keep up to maxValuedKeys of these, and an RLS value may be 64 Ki characters.
  return { key: sanitizeStatName(boundedKey(key)), domain, valued: true, shadow };
}

/**
 * The units used before a charge of `cost`, such that the stats see it over the limit exactly
 * when the decision denied it: allowed, the limit less what remains and the charge; denied
 * (nothing charged), the limit less what remains, and at least enough to go over with `cost`.
 */
export function usedBefore(d: Decision, cost: number): number {
  const used = Math.max(0, d.limit - d.remaining);
  if (d.allowed) return Math.max(0, used - cost);
  return Math.max(used, d.limit + 1 - cost, 0);
}
