/**
 * What the decision service carries through one check (service/decide.ts) and hands to the
 * helpers that decide a descriptor (service/override.ts): internal, never seen by callers.
 */
import type { CompiledPolicy, Rules } from "../config/rules.js";
import type { Matched } from "./explain.js";
import type { LimitStatKey } from "./types.js";

/** One check in progress: what every descriptor of it is decided with. */
export interface Check {
  readonly rules: Rules;
  readonly nowMs: number;
  /** The request's cost, checked once by {@link requestCost}; each rule multiplies it by its own `cost`. */
  readonly cost: number;
  /** Decide without charging. */
  readonly peek: boolean;
  /** A cost above what a policy could ever admit is denied (Envoy's RLS) rather than an error. */
  readonly oversizeDeny: boolean;
  /** The rule names another descriptor of this request `replaces` (service/replaces.ts). */
  readonly replaced?: ReadonlySet<string> | undefined;
}

/** One descriptor (or plain key) to decide under a policy. */
export interface Application {
  readonly check: Check;
  /** The domain for metrics labels: `(policy)`, `(unknown)` or the domain itself. */
  readonly label: string;
  readonly domain: string;
  /** The canonical descriptor key, or the plain key. */
  readonly key: string;
  readonly ruleId: string;
  readonly policy: CompiledPolicy;
  readonly matched: Matched;
  /** This descriptor's request cost (the check's, or its own `hits_addend`); 0: check only, charge nothing. */
  readonly cost: number;
  /** envoyproxy/ratelimit's stat key of the limit (service/limit-stats.ts), when the observer counts them. */
  readonly stat?: LimitStatKey | undefined;
}
