/**
 * Compiled rules: the immutable model the decision service matches and decides with, built from
 * a rules file by `schema.ts` (and rebuilt whole on every reload).
 */
import type { ConcurrencyPool } from "./pools.js";
import type { ConfigIssue, LimitSpec, ResolvedLimit } from "ratekeeper";

/**
 * A policy ready to decide with: what a rule and a named policy both carry, and all the decision
 * service needs to run one.
 */
export interface CompiledPolicy {
  /** The policy as written (the library's spec objects); empty when unlimited. */
  readonly specs: readonly LimitSpec[];
  /** The policy resolved by the library; empty when unlimited. */
  readonly limits: readonly ResolvedLimit[];
  /** The library's policy id plus the limits' names: policies with the same id share one RateLimiter. */
  readonly policyId: string;
  /** Cost units each hit is charged (multiplied by the request's own cost). @default 1 */
  readonly cost: number;
  /** Evaluate and count, but never deny (envoyproxy/ratelimit's `shadow_mode`). */
  readonly shadow: boolean;
  /**
   * envoyproxy/ratelimit's `requests_per_unit: 0`: every request is over the limit, counted per
   * clock-aligned `windowMs` (the library has no limit of 0, so the service answers these itself).
   */
  readonly denyAll?: { readonly windowMs: number; readonly name: string } | undefined;
  /**
   * The name Envoy's RLS reports in `current_limit.name`: envoyproxy/ratelimit's
   * `rate_limit.name` ("" when not given). Undefined for policies in ratekeeper's own form, which
   * report the deciding limit's name (`100-per-10s`).
   */
  readonly rlsName?: string | undefined;
  /**
   * envoyproxy/ratelimit's `quota_mode`: a soft limit. Over it, the descriptor's status still
   * denies, but the check is denied only when every quota descriptor of it is (or an ordinary one
   * is); see `overallAllowed` in service/status.ts.
   */
  readonly quotaMode?: boolean | undefined;
}

/** One compiled rule: a descriptor node that carries a policy (or `unlimited`). */
export interface Rule extends CompiledPolicy {
  /** Stable id for metrics and explain: domain plus the key/value path, e.g. `api/remote_address/path=/search*`. */
  readonly id: string;
  /** Where it sits in the file, e.g. `domains[0].descriptors[1]`. */
  readonly path: string;
  readonly domain: string;
  /** Never limited. */
  readonly unlimited: boolean;
  /** envoyproxy/ratelimit's `rate_limit.replaces`: the names of rules this one switches off in the same request. */
  readonly replaces?: readonly string[] | undefined;
  /** envoyproxy/ratelimit's `detailed_metric`: its stats are kept per descriptor value, not per rule (metrics/envoy-stats.ts). */
  readonly detailedMetric?: boolean | undefined;
}

/** A level of the descriptor tree: exact key=value children, wildcard prefixes, and any-value children. */
export interface Level {
  /** key -> value -> node (two lookups, no key string built per check). */
  readonly exact: Map<string, Map<string, TreeNode>>;
  /**
   * Wildcard values in file order, as envoyproxy/ratelimit tries them: `parts` is the value split
   * on `*` (each `*` matches any run of characters); `shared`: `share_threshold`, every value
   * matching shares one counter, kept under the pattern.
   */
  readonly wildcards: Array<{ readonly key: string; readonly parts: readonly string[]; readonly node: TreeNode; readonly shared: boolean }>;
  /** key -> node matching any value of that key. */
  readonly anyValue: Map<string, TreeNode>;
}

export interface TreeNode {
  readonly rule: Rule | undefined;
  readonly children: Level | undefined;
  /** How the node matches, for explain: `user_id`, `user_id=vip` or `path=/search*`. */
  readonly label: string;
  /** envoyproxy/ratelimit's `value_to_metric`: its stat key carries the request's value here. */
  readonly valueToMetric?: boolean | undefined;
}

/** A named policy for plain-key checks. */
export interface NamedPolicy extends CompiledPolicy {
  readonly name: string;
}

/** Validated, compiled rules: what the service decides with. Immutable; a reload builds a new one. */
export interface Rules {
  /** The file they came from. */
  readonly source: string;
  readonly domains: ReadonlyMap<string, Level>;
  readonly policies: ReadonlyMap<string, NamedPolicy>;
  /** Concurrency limits (`concurrency:`), by name: leases taken with `POST /v1/leases/acquire`. */
  readonly pools: ReadonlyMap<string, ConcurrencyPool>;
  /** Every rule, in file order. */
  readonly rules: readonly Rule[];
}

/**
 * Thrown for a bad rules file: every problem, each prefixed by the file, its line and column
 * when known, and the path, e.g.
 * `rules.yaml:12:9: domains[0].descriptors[2].limit: must be a positive whole number (got 0)`.
 */
export class RulesError extends Error {
  override readonly name = "RulesError";
  readonly file: string;
  readonly issues: readonly ConfigIssue[];
  /** Where each issue sits in the file (1-based), when known: the message then reads `file:line:col: path: ...`. */
  readonly positions: readonly (SourcePosition | undefined)[];
  constructor(file: string, issues: readonly ConfigIssue[], positions: readonly (SourcePosition | undefined)[] = []) {
    super(
      issues
        .map((i, n) => {
          const at = positions[n];
          return `${file}${at ? `:${at.line}:${at.col}` : ""}: ${i.path ? `${i.path}: ` : ""}${i.message}`;
        })
        .join("\n"),
    );
    this.file = file;
    this.issues = issues;
    this.positions = positions;
  }
}

/** A line and column in a file, both from 1. */
export interface SourcePosition {
  readonly line: number;
  readonly col: number;
}
