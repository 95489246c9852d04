/**
 * The decision counts behind `ratekeeper_decisions_total{domain,rule,outcome}`, kept on the hot
 * path as numbers in a Float64Array per (domain, rule), one slot per outcome, and handed to
 * prom-client at scrape time. Consecutive decisions mostly share their rule: the last rule's
 * counts are compared before any Map lookup. Series are handed over in the order each was first
 * counted, the order prom-client told every decision would list them in
 * (test/metrics-scrape.test.ts compares the scrape byte for byte).
 */

/** The outcomes the service reports, each a slot of a rule's counts. */
const OUTCOMES = ["ok", "over_limit", "shadow_over_limit", "unlimited", "no_match", "replaced", "blocked", "refunded"] as const;

/** The labels of one series of the counter. */
export interface DecisionLabels {
  readonly domain: string;
  readonly rule: string;
  readonly outcome: string;
}

/** One rule's counts since the last scrape, by outcome slot; `seen`: the slots already listed. */
interface RuleCounts {
  readonly domain: string;
  readonly rule: string;
  readonly counts: Float64Array;
  seen: number;
  /** Outcomes other than the seven (callers outside the service): one slot each. */
  other: Map<string, Float64Array> | undefined;
}

/** One series: its labels, and where its count since the last scrape is. */
interface Series {
  readonly labels: DecisionLabels;
  readonly counts: Float64Array;
  readonly slot: number;
}

/** The slot of an outcome, or -1 for one the service does not report. */
function slotOf(outcome: string): number {
  switch (outcome) {
    case "ok":
      return 0;
    case "over_limit":
      return 1;
    case "shadow_over_limit":
      return 2;
    case "unlimited":
      return 3;
    case "no_match":
      return 4;
    case "replaced":
      return 5;
    case "blocked":
      return 6;
    case "refunded":
      return 7;
    default:
      return -1;
  }
}

/**
 * Decisions counted by domain, rule and outcome until the next scrape.
 * @example
 * const c = new DecisionCounts();
 * c.count("api", "api/user", "ok");
 * c.flush((labels, n) => counter.inc(labels, n));
 */
export class DecisionCounts {
  private readonly byDomain = new Map<string, Map<string, RuleCounts>>();
  /** Every series counted so far, in the order each was first counted. */
  private readonly series: Series[] = [];
  private last: RuleCounts | undefined;

  count(domain: string, rule: string, outcome: string): void {
    let c = this.last;
    if (c === undefined || c.rule !== rule || c.domain !== domain) c = this.last = this.countsOf(domain, rule);
    const slot = slotOf(outcome);
    if (slot < 0) return this.countOther(c, outcome);
    c.counts[slot]! += 1;
    if ((c.seen & (1 << slot)) === 0) {
      c.seen |= 1 << slot;
      this.series.push({ labels: { domain: c.domain, rule: c.rule, outcome: OUTCOMES[slot] as string }, counts: c.counts, slot });
    }
  }

  /**
   * An `ok` of (domain, rule) whose charge was given back: counted `refunded` instead. When the
   * `ok` was handed over already (a scrape came between), it is taken from the next ones: a
   * count below 0 is kept, never handed over (a counter never goes down).
   */
  refunded(domain: string, rule: string): void {
    const c = this.byDomain.get(domain)?.get(rule);
    // Not listed (forgotten by clear() since): nothing to take it from.
    if (c === undefined || (c.seen & 1) === 0) return;
    c.counts[0]! -= 1;
    this.count(domain, rule, "refunded");
  }

  /** Hands each series' count since the last flush (when above 0) to `inc`, first counted first. */
  flush(inc: (labels: DecisionLabels, n: number) => void): void {
    for (const s of this.series) {
      const n = s.counts[s.slot] as number;
      if (n > 0) {
        inc(s.labels, n);
        s.counts[s.slot] = 0;
      }
    }
  }

  /** Forgets every count and series (prom-client's `reset()`: each is listed again when counted). */
  clear(): void {
    this.byDomain.clear();
    this.series.length = 0;
    this.last = undefined;
  }

  private countsOf(domain: string, rule: string): RuleCounts {
    let rules = this.byDomain.get(domain);
    if (rules === undefined) this.byDomain.set(domain, (rules = new Map<string, RuleCounts>()));
    let c = rules.get(rule);
    if (c === undefined) {
      c = { domain, rule, counts: new Float64Array(OUTCOMES.length), seen: 0, other: undefined };
      rules.set(rule, c);
    }
    return c;
  }

  private countOther(c: RuleCounts, outcome: string): void {
    c.other ??= new Map<string, Float64Array>();
    let counts = c.other.get(outcome);
    if (counts === undefined) {
      c.other.set(outcome, (counts = new Float64Array(1)));
      this.series.push({ labels: { domain: c.domain, rule: c.rule, outcome }, counts, slot: 0 });
    }
    counts[0]! += 1;
  }
}
