import { tooManyRequests } from "./problem.js";

/** A kept 429 `detail`, its whole JSON body and its `Retry-After` header (one shared pair: callers only read pairs). */
export interface RefusalText {
  readonly detail: string;
  readonly body: string;
  readonly retryAfter: [string, string];
}

/**
 * The `detail` and the JSON body of a 429 naming one policy: the same few over and over under a
 * flood, so they are kept (JSON.stringify was about a microsecond per denial; then building the
 * detail and a "<policy> <seconds>" key to look the body up were a third of a denial's own CPU
 * time, docs/benchmarks/overhead.md). Looked up by policy, then seconds (no key built); at most
 * 64 kept. Each denial still gets a problem object of its own (`result.problem` is the caller's).
 * @example new RefusalTexts().get("100-per-1m", 18).body
 */
export class RefusalTexts {
  /** Texts by policy, then seconds. */
  private readonly bodies = new Map<string, Map<number, RefusalText>>();
  /** Entries in {@link RefusalTexts.bodies}, at most 64. */
  private bodyCount = 0;

  /** The text of a 429 from `policy` with `Retry-After: seconds`. */
  get(policy: string, seconds: number): RefusalText {
    let bySeconds = this.bodies.get(policy);
    let text = bySeconds?.get(seconds);
    if (text !== undefined) return text;
    if (this.bodyCount >= 64) {
      this.bodies.clear();
      this.bodyCount = 0;
      bySeconds = undefined;
    }
    if (bySeconds === undefined) this.bodies.set(policy, (bySeconds = new Map<number, RefusalText>()));
    const problem = tooManyRequests(seconds, [policy]);
    text = {
      detail: problem.detail,
      body: JSON.stringify(problem),
      retryAfter: Object.freeze(["Retry-After", String(seconds)]) as [string, string],
    };
    bySeconds.set(seconds, text);
    this.bodyCount++;
    return text;
  }
}
