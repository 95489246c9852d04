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
  /**
   * With `share_threshold` wildcards on the way: the entries to count under, each such value
   * replaced by its pattern (`files/*`), so every matching value shares one counter.
   */
  readonly shared?: readonly DescriptorEntry[] | undefined;
  /** Which levels matched a node with `value_to_metric` (for its stat key); undefined when none did. */
  readonly valueToMetric?: readonly boolean[] | undefined;
}

/**
 * Finds the rule for one descriptor, pure, with envoyproxy/ratelimit's semantics
 * (src/config/config_impl.go, `GetLimit`): walk the entries in order; at each level try the exact
 * `key=value`, then the wildcard values (`value: foo*` or `a*b*c`, in file order), then the key
 * with no value (any value). The limit applies only when the LAST entry lands on a node with a
 * policy: a descriptor with more entries than the configured depth, or one stopping above the
 * configured policy, matches nothing.
 * @example matchDescriptor(rules, "api", [{ key: "user_id", value: "42" }]).rule?.id // "api/user_id"
 */
export function matchDescriptor(rules: Rules, domain: string, entries: readonly DescriptorEntry[]): Match {
  let level: Level | undefined = rules.domains.get(domain);
  if (level === undefined) return { rule: undefined, via: [], miss: `no domain "${domain}" in the rules` };
  const via: string[] = [];
  let shared: DescriptorEntry[] | undefined;
  let toMetric: boolean[] | undefined;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as DescriptorEntry;
    const w: Level["wildcards"][number] | undefined =
      level.wildcards.length > 0 && level.exact.get(e.key)?.get(e.value) === undefined ? findWildcard(level, e) : undefined;
    const node: TreeNode | undefined = w?.node ?? findNode(level, e);
    if (w?.shared) (shared ??= entries.slice())[i] = { key: e.key, value: w.parts.join("*") };
    if (node === undefined) {
      return { rule: undefined, via, miss: `no descriptor for ${e.key}=${e.value}${via.length ? ` under ${via.join(" > ")}` : ""}` };
    }
    via.push(node.label);
    if (node.valueToMetric === true) (toMetric ??= new Array<boolean>(entries.length).fill(false))[i] = true;
    if (i === entries.length - 1) {
      if (node.rule) return { rule: node.rule, via, miss: undefined, shared, valueToMetric: toMetric };
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
  return level.exact.get(e.key)?.get(e.value) ?? level.anyValue.get(e.key);
}

function findWildcard(level: Level, e: DescriptorEntry): Level["wildcards"][number] | undefined {
  for (const w of level.wildcards) if (w.key === e.key && globMatch(w.parts, e.value)) return w;
  return undefined;
}

/**
 * Whether `value` matches a pattern split on `*` (each `*` any run of characters, empty included),
 * as envoyproxy/ratelimit's `wildcardMatch`: the first part a prefix, the last a suffix, the
 * middle ones in order between them.
 */
export function globMatch(parts: readonly string[], value: string): boolean {
  if (parts.length === 1) return parts[0] === value;
  const first = parts[0] as string;
  const last = parts[parts.length - 1] as string;
  if (value.length < first.length + last.length || !value.startsWith(first) || !value.endsWith(last)) return false;
  let rest = value.slice(first.length, value.length - last.length);
  for (let i = 1; i < parts.length - 1; i++) {
    const at = rest.indexOf(parts[i] as string);
    if (at === -1) return false;
    rest = rest.slice(at + (parts[i] as string).length);
  }
  return true;
}
