import type { Decision, ResolvedLimit } from "ratekeeper";
import { isPlain, jsonInner, notAscii } from "../json-text.js";
import type { Explain } from "./types.js";

/** How a descriptor matched: a rule's match path (`["remote_address", "path=/search*"]`) or a description (`policy login`). */
export type Matched = readonly string[] | string;

export function matchedText(matched: Matched): string {
  return typeof matched === "string" ? matched : `matched ${matched.join(" > ")}`;
}

/**
 * What the explanations of one rule (or named policy) under its limits share, built once: the
 * sentence's start (`matched user_id: sliding-window 100 per 60000 ms; `) and, for the JSON
 * answer, the explanation's JSON up to there (`{"rule":"api/user_id","source":"rule","why":"matched…; `),
 * so that per decision only the outcome is written.
 */
export class ExplainParts {
  /** The sentence up to the outcome. */
  readonly whyStart: string;
  /** The explanation's JSON, open inside its `why` string. */
  readonly jsonStart: string;
  /** Whether {@link jsonStart} is plain ASCII (as many UTF-8 bytes as characters). */
  readonly ascii: boolean;

  constructor(
    readonly rule: string,
    readonly matched: Matched,
    readonly limits: readonly ResolvedLimit[],
  ) {
    // `policy` for a named policy's decisions (rule id `policy:<name>`), as DecisionExplain's `source`.
    const source = rule.startsWith("policy:") ? "policy" : "rule";
    this.whyStart = `${matchedText(matched)}: ${describeLimits(limits)}; `;
    this.ascii = isPlain(rule) && isPlain(this.whyStart);
    this.jsonStart = `{"rule":${JSON.stringify(rule)},"source":"${source}","why":"${JSON.stringify(this.whyStart).slice(1, -1)}`;
  }

  /** Whether these are the parts of this rule, match path and limits. */
  fits(rule: string, matched: Matched, limits: readonly ResolvedLimit[]): boolean {
    return this.rule === rule && this.limits === limits && sameMatched(this.matched, matched);
  }
}

function sameMatched(a: Matched, b: Matched): boolean {
  if (typeof a === "string" || typeof b === "string") return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The parts of each policy's explanations, per policy object (a compiled rule, a named policy, a
 * caller-sent limit). A policy is decided under one rule id, match path and set of limits
 * nearly always; when they differ (a caller-sent limit shared by two domains, a rule's limits
 * after a reload) the parts are built afresh, so they are always those of the decision.
 */
const PARTS = new WeakMap<object, ExplainParts>();

export function explainParts(policy: object, rule: string, matched: Matched, limits: readonly ResolvedLimit[]): ExplainParts {
  let p = PARTS.get(policy);
  if (p === undefined || !p.fits(rule, matched, limits)) {
    p = new ExplainParts(rule, matched, limits);
    PARTS.set(policy, p);
  }
  return p;
}

/**
 * The explain of a decision by a rule or named policy. Its sentence is built only when read
 * (the JSON API reads it; /v1/auth and gRPC never do): formatting it on every check cost more
 * than the match itself. Its shared parts are looked up only then, too.
 */
export class DecisionExplain implements Explain {
  constructor(
    /** The policy object decided under: what the explanation's parts are kept with. */
    private readonly policy: object,
    readonly rule: string,
    private readonly matched: Matched,
    private readonly limits: readonly ResolvedLimit[],
    private readonly d: Decision,
    private readonly cost: number,
    private readonly shadow: boolean,
  ) {}

  get source(): "rule" | "policy" {
    return this.rule.startsWith("policy:") ? "policy" : "rule";
  }

  get why(): string {
    return this.parts().whyStart + describeOutcome(this.d, this.cost, this.shadow);
  }

  /**
   * `JSON.stringify(this)`, from the parts built once per rule: only the outcome is written per
   * decision (a limit's name in it escaped as `JSON.stringify` would).
   */
  json(): string {
    const parts = this.parts();
    if (!parts.ascii) notAscii();
    return `${parts.jsonStart}${describeOutcome(this.d, this.cost, this.shadow, jsonInner)}"}`;
  }

  toJSON(): Explain {
    return { rule: this.rule, source: this.source, why: this.why };
  }

  private parts(): ExplainParts {
    return explainParts(this.policy, this.rule, this.matched, this.limits);
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

const asIs = (s: string): string => s;

/**
 * The outcome in words: allowed with what is left, denied and when to retry, or decided by a
 * failure policy. `name` writes the deciding limit's name (as it is, or quoted for JSON); the
 * rest of the sentence is plain ASCII.
 */
export function describeOutcome(d: Decision, cost: number, shadow: boolean, name: (s: string) => string = asIs): string {
  if (d.reason === "store-error" || d.reason === "insurance" || d.reason === "degraded")
    return `the store was down; its failure policy ${d.allowed ? "allowed" : "denied"} (${d.reason})`;
  if (d.reason === "overloaded") return "denied: too many decisions already waiting for the store (backpressure)";
  if (d.allowed) return `allowed cost ${cost}, ${d.remaining} left${d.delayMs > 0 ? `, after a ${d.delayMs} ms delay` : ""}`;
  const lim = `limit ${name(d.policyName)} has no room for cost ${cost}; retry after ${d.retryAfterMs} ms`;
  return shadow ? `would deny (${lim}) but the rule is in shadow mode` : `denied: ${lim}`;
}
