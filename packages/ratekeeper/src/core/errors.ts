import { describeNonPlain } from "./plain-object.js";

/** One problem in a configuration, with the path of the offending field. */
export interface ConfigIssue {
  /** Path of the field, e.g. `limits[1].window`. */
  readonly path: string;
  /** What is wrong, e.g. `must be > 0 (got -5)`. */
  readonly message: string;
}

/**
 * Thrown for a bad configuration: lists every problem found, each with its path.
 * @example
 * try { new RateLimiter({ algorithm: "gcra", limit: 0, window: "1s" }) }
 * catch (e) { if (e instanceof RateLimitConfigError) console.log(e.issues) }
 */
export class RateLimitConfigError extends Error {
  override readonly name = "RateLimitConfigError";
  readonly code = "ERR_RATEKEEPER_CONFIG";
  readonly issues: readonly ConfigIssue[];
  constructor(issues: readonly ConfigIssue[], prefix?: string) {
    const lines = issues.map((i) => `${prefix ? `${prefix}: ` : ""}${i.path}: ${i.message}`);
    super(lines.length === 1 ? lines[0]! : `invalid rate limit configuration:\n  ${lines.join("\n  ")}`);
    this.issues = issues;
  }
}

/**
 * Runs `build` and returns its result; when it throws a {@link RateLimitConfigError}, adds that
 * error's issues to `issues` (each passed through `rewrite` first, when given; `undefined` drops
 * one) and returns `undefined`, so that one error can list every problem of a configuration.
 * Any other error propagates.
 * @example
 * const issues: ConfigIssue[] = [];
 * const windowMs = collectIssues(issues, () => parseDuration(options.window, "window"));
 * if (issues.length > 0) throw new RateLimitConfigError(issues);
 */
export function collectIssues<T>(
  issues: ConfigIssue[],
  build: () => T,
  rewrite?: (issue: ConfigIssue) => ConfigIssue | undefined,
): T | undefined {
  try {
    return build();
  } catch (e) {
    if (!(e instanceof RateLimitConfigError)) throw e;
    for (const issue of e.issues) {
      const kept = rewrite ? rewrite(issue) : issue;
      if (kept !== undefined) issues.push(kept);
    }
    return undefined;
  }
}

/**
 * Renders a value for an error message (`got ...`) without dumping large objects: strings
 * quoted, objects as JSON cut at 60 characters, objects that are not plain ones by their kind.
 */
export function describeValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return String(value);
  // A Map, Set, Date or class instance by its kind ("a Map"): its JSON ({}) would mislead.
  const kind = describeNonPlain(value);
  if (kind !== undefined) return kind;
  if (typeof value === "bigint") return `${value}n`;
  try {
    const s = JSON.stringify(value);
    return s.length > 60 ? `${s.slice(0, 57)}...` : s;
  } catch {
    // JSON cannot print it (nested past the stack, or holding itself): its kind, since "object"
    // would make "must be an object (got object)" of an array.
    return Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : typeof value;
  }
}

/**
 * Adds an issue for every own property of `options` that is not in `known` (and not undefined):
 * a misspelt option (`maxkeys`, `timeoutMS`) is refused, never silently ignored.
 */
export function unknownOptions(options: object, known: readonly string[], issues: ConfigIssue[]): void {
  for (const [k, v] of Object.entries(options)) {
    if (v !== undefined && !known.includes(k)) issues.push({ path: k, message: `unknown option (known: ${known.join(", ")})` });
  }
}

/**
 * Thrown (as a rejected promise) when a store fails and its failure policy says to surface it.
 * The original error is in `cause`.
 */
export class RateLimitStoreError extends Error {
  override readonly name = "RateLimitStoreError";
  readonly code = "ERR_RATEKEEPER_STORE";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
