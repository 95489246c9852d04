import type { Level, Rule, Rules, TreeNode } from "./rules.js";

/** One key/value pair of a descriptor (Envoy's `RateLimitDescriptor.Entry`). */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/** What matching found for one descriptor. */
export interface Match {
  /** The rule that applies, or undefined when none does (the descriptor is then not limited). */
  readonly rule: Rule | undefined;
  /** The node labels walked, e.g. `["remote_address", "path=/search*"]`, for explain. */
  readonly via: readonly string[];
  /** Why no rule applied, when none did. */
  readonly miss: string | undefined;
}

/**
 * Finds the rule for one descriptor, pure, with envoyproxy/ratelimit's semantics
 * (src/config/config_impl.go, `GetLimit`): walk the entries in order; at each level try the exact
 * `key=value`, then the wildcard values (`value: foo*`, a prefix, in file order), then the key
 * with no value (any value). The limit applies only when the LAST entry lands on a node with a
 * policy: a descriptor with more entries than the configured depth, or one stopping above the
 * configured policy, matches nothing.
 * @example matchDescriptor(rules, "api", [{ key: "user_id", value: "42" }]).rule?.id // "api/user_id"
 */
export function matchDescriptor(rules: Rules, domain: string, entries: readonly DescriptorEntry[]): Match {
  let level: Level | undefined = rules.domains.get(domain);
  if (level === undefined) return { rule: undefined, via: [], miss: `no domain "${domain}" in the rules` };
  const via: string[] = [];
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as DescriptorEntry;
    const node: TreeNode | undefined = findNode(level, e);
    if (node === undefined) {
      return { rule: undefined, via, miss: `no descriptor for ${e.key}=${e.value}${via.length ? ` under ${via.join(" > ")}` : ""}` };
    }
    via.push(node.label);
    if (i === entries.length - 1) {
      if (node.rule) return { rule: node.rule, via, miss: undefined };
      return { rule: undefined, via, miss: `${via.join(" > ")} has no policy of its own (only nested descriptors)` };
    }
    if (node.children === undefined) {
      return {
        rule: undefined,
        via,
        miss: `the descriptor has ${entries.length} entries but the rules stop at depth ${i + 1} (${via.join(" > ")})`,
      };
    }
    level = node.children;
  }
  return { rule: undefined, via, miss: "an empty descriptor matches nothing" };
}

function findNode(level: Level, e: DescriptorEntry): TreeNode | undefined {
  const exact = level.exact.get(e.key)?.get(e.value);
  if (exact) return exact;
  for (const w of level.wildcards) if (w.key === e.key && e.value.startsWith(w.prefix)) return w.node;
  return level.anyValue.get(e.key);
}
