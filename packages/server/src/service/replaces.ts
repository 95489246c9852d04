/**
 * envoyproxy/ratelimit's `rate_limit.replaces`, applied per request as its service does
 * (src/service/ratelimit.go, `constructLimitsToCheck`): every descriptor of the request is
 * matched first; the names listed in the `replaces` of the matched limits (unlimited ones
 * included) are collected; then a descriptor whose matched, limited rule has one of those names
 * is not limited in this request (and not charged). A descriptor that carries its own limit
 * (Envoy's route config) skips the rules, so it neither replaces nor is replaced.
 */
import { matchDescriptor, type DescriptorEntry } from "../config/match.js";
import type { Rule, Rules } from "../config/rules.js";
import type { CallerLimit } from "./types.js";

/** Rules -> whether any rule lists `replaces` (computed once per rules object: most have none). */
const HAS_REPLACES = new WeakMap<Rules, boolean>();

function hasReplaces(rules: Rules): boolean {
  let has = HAS_REPLACES.get(rules);
  if (has === undefined) HAS_REPLACES.set(rules, (has = rules.rules.some((r) => (r.replaces?.length ?? 0) > 0)));
  return has;
}

/**
 * The names the request's matched limits replace; undefined when there are none (the common
 * case costs one WeakMap lookup and no matching).
 * @example replacedNames(rules, "example7", [[k1, user], [k2, user]], undefined) // Set { "specific_limit" }
 */
export function replacedNames(
  rules: Rules,
  domain: string,
  descriptors: readonly (readonly DescriptorEntry[])[],
  callerLimits: ReadonlyArray<CallerLimit | undefined> | undefined,
): ReadonlySet<string> | undefined {
  if (descriptors.length < 2 || !hasReplaces(rules)) return undefined;
  let names: Set<string> | undefined;
  for (const [i, entries] of descriptors.entries()) {
    if (callerLimits?.[i] !== undefined || !Array.isArray(entries)) continue;
    for (const name of matchDescriptor(rules, domain, entries).rule?.replaces ?? []) (names ??= new Set()).add(name);
  }
  return names;
}

/** Whether a matched rule is switched off by a name another descriptor of the request replaces (an unlimited rule never is). */
export function isReplaced(rule: Rule, replaced: ReadonlySet<string> | undefined): boolean {
  return replaced !== undefined && !rule.unlimited && rule.rlsName !== undefined && rule.rlsName !== "" && replaced.has(rule.rlsName);
}
