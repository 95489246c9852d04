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
