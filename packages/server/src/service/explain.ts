import type { Decision, ResolvedLimit } from "ratekeeper";
import type { Explain } from "./types.js";

/** How a descriptor matched: a rule's match path (`["remote_address", "path=/search*"]`) or a description (`policy login`). */
export type Matched = readonly string[] | string;

export function matchedText(matched: Matched): string {
  return typeof matched === "string" ? matched : `matched ${matched.join(" > ")}`;
}

/**
 * The explain of a decision by a rule or named policy. Its sentence is built only when read
 * (the JSON API reads it; /v1/auth and gRPC never do): formatting it on every check cost more
 * than the match itself.
 */
export class DecisionExplain implements Explain {
  constructor(
    readonly rule: string,
    readonly source: "rule" | "policy",
    private readonly matched: Matched,
    private readonly limits: readonly ResolvedLimit[],
    private readonly d: Decision,
    private readonly cost: number,
    private readonly shadow: boolean,
  ) {}

  get why(): string {
    return `${matchedText(this.matched)}: ${describeLimits(this.limits)}; ${describeOutcome(this.d, this.cost, this.shadow)}`;
  }

  toJSON(): Explain {
    return { rule: this.rule, source: this.source, why: this.why };
  }
}

const LIMIT_TEXT = new WeakMap<readonly ResolvedLimit[], string>();

/** `fixed-window 100 per 60000 ms + gcra 2 per 1000 ms`, computed once per policy. */
export function describeLimits(limits: readonly ResolvedLimit[]): string {
  let t = LIMIT_TEXT.get(limits);
  if (t === undefined) {
    t = limits.map((l) => `${l.algorithm} ${l.limit} per ${l.windowMs} ms`).join(" + ");
    LIMIT_TEXT.set(limits, t);
  }
  return t;
}

/** The outcome in words: allowed with what is left, denied and when to retry, or decided by a failure policy. */
export function describeOutcome(d: Decision, cost: number, shadow: boolean): string {
  if (d.reason === "store-error" || d.reason === "insurance" || d.reason === "degraded")
    return `the store was down; its failure policy ${d.allowed ? "allowed" : "denied"} (${d.reason})`;
  if (d.reason === "overloaded") return "denied: too many decisions already waiting for the store (backpressure)";
  if (d.allowed) return `allowed cost ${cost}, ${d.remaining} left${d.delayMs > 0 ? `, after a ${d.delayMs} ms delay` : ""}`;
  const lim = `limit ${d.policyName} has no room for cost ${cost}; retry after ${d.retryAfterMs} ms`;
  return shadow ? `would deny (${lim}) but the rule is in shadow mode` : `denied: ${lim}`;
}
