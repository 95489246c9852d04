/**
 * What the decision service carries through one check (service/decide.ts) and hands to the
 * helpers that decide a descriptor (service/override.ts): internal, never seen by callers.
 */
import type { Decision } from "ratekeeper";
import type { CompiledPolicy, NamedPolicy, Rules } from "../config/rules.js";
import { charged, type Charge } from "./charges.js";
import { CheckError } from "./types.js";
import type { Matched } from "./explain.js";
import type { LimitStatKey } from "./types.js";

/** What a {@link Check} is made of. */
export interface CheckInit {
  readonly rules: Rules;
  /** Milliseconds since the epoch. */
  readonly clock: () => number;
  readonly cost: number;
  readonly peek: boolean;
  readonly oversizeDeny: boolean;
  /** Where the check records what it charges, to give it back if it is answered with an error (service/charges.ts); undefined: not recorded. */
  readonly charges?: Charge[] | undefined;
}

/** One check in progress: what every descriptor of it is decided with. */
export class Check {
  readonly rules: Rules;
  /** The request's cost, checked once by `requestCost`; each rule multiplies it by its own `cost`. */
  readonly cost: number;
  /** Decide without charging. */
  readonly peek: boolean;
  /** A cost above what a policy could ever admit is denied (Envoy's RLS) rather than an error. */
  readonly oversizeDeny: boolean;
  /** The rule names another descriptor of this request `replaces` (service/replaces.ts). */
  readonly replaced: ReadonlySet<string> | undefined;
  /** See {@link CheckInit.charges}. */
  readonly charges: Charge[] | undefined;
  private readonly clock: () => number;
  /** The time, once read; NaN before. */
  private t = NaN;

  constructor(init: CheckInit, replaced?: ReadonlySet<string>) {
    this.rules = init.rules;
    this.clock = init.clock;
    this.cost = init.cost;
    this.peek = init.peek;
    this.oversizeDeny = init.oversizeDeny;
    this.replaced = replaced;
    this.charges = init.charges;
  }

  /**
   * The check's time, read from the clock the first time it is asked for and the same for every
   * descriptor after: only overrides, blocks and deny-all rules use it, and a clock read costs
   * 40-45 ns on common VMs, as much as a tenth of the decision (docs/benchmarks/service.md).
   */
  get nowMs(): number {
    if (Number.isNaN(this.t)) this.t = this.clock();
    return this.t;
  }

  /** This check with the rule names other descriptors replace (if any), recording its charges in `charges`; the check it replaces is not used after. */
  derive(replaced: ReadonlySet<string> | undefined, charges: Charge[] | undefined): Check {
    const { rules, clock, cost, peek, oversizeDeny } = this;
    const c = new Check({ rules, clock, cost, peek, oversizeDeny, charges }, replaced);
    // The time if read already (NaN if not: it is read when a descriptor needs it, not before).
    c.t = this.t;
    return c;
  }

  /** Whether this check records its charges ({@link charged}): a charge is built only then. */
  get recording(): boolean {
    return this.charges !== undefined && !this.peek;
  }

  /** Records `charge` (a consume, never a peek) when `d` charged the store. */
  charged(d: Decision, charge: Charge): void {
    if (this.recording && charged(d)) this.charges?.push(charge);
  }
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

/** A named policy of the rules file, or a CheckError naming the ones there are. */
export function namedPolicy(rules: Rules, name: string | undefined): NamedPolicy {
  if (typeof name !== "string") throw new CheckError("policy: a plain key needs the name of a policy from the rules file's policies");
  const np = rules.policies.get(name);
  if (np === undefined) {
    const known = [...rules.policies.keys()];
    throw new CheckError(`policy: no policy named ${JSON.stringify(name)} (known: ${known.length ? known.join(", ") : "none"})`);
  }
  return np;
}
