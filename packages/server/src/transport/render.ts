import type { ResolvedLimit } from "ratekeeper";
import { HeaderWriter, toSeconds, wireName, type HeaderStyle } from "ratekeeper/http";
import { statusDetail } from "../service/status.js";
import type { CheckResult, DescriptorStatus } from "../service/types.js";

/**
 * The most restrictive status of a check: a denial with the longest wait, else the limited
 * status with the fewest units left. Unlimited and unmatched descriptors set no headers.
 */
function decisive(statuses: readonly DescriptorStatus[]): DescriptorStatus | undefined {
  let best: DescriptorStatus | undefined;
  for (const s of statuses) {
    if (s.limit === null || (s.shadow && s.overLimit)) continue;
    if (best === undefined) best = s;
    else if (!s.allowed && (best.allowed || s.retryAfterMs > best.retryAfterMs)) best = s;
    else if (s.allowed && best.allowed && (s.remaining ?? 0) < (best.remaining ?? 0)) best = s;
  }
  return best;
}

/**
 * The same limit headers as the middleware, rendered by the library's own `HeaderWriter`
 * (`ratekeeper/http`) for the most restrictive descriptor, in the middleware's default style
 * (`ietf`: `RateLimit-Policy: "100-per-1m";q=100;w=60` and `RateLimit: "100-per-1m";r=42;t=18`)
 * or the styles chosen with `--headers`; plus `Retry-After` (RFC 9110 §10.2.3, whole seconds
 * rounded up, so retrying after it succeeds) on a denial. A shadow rule's would-be denial sets
 * no headers: shadow mode must not change what clients see. Names are in lower case
 * (`wireName`): node copies every mixed-case name it is given into lower case, per response.
 */
export function limitHeaders(
  statuses: readonly DescriptorStatus[],
  styles: readonly HeaderStyle[] = DEFAULT_STYLES,
): Record<string, string> {
  const s = decisive(statuses);
  const h: Record<string, string> = {};
  if (s === undefined) return h;
  const detail = statusDetail(s);
  if (detail) {
    let writers = WRITERS.get(detail.limits);
    if (writers === undefined) {
      writers = new Map();
      WRITERS.set(detail.limits, writers);
    }
    let w = writers.get(styles);
    if (w === undefined) {
      w = new HeaderWriter(detail.limits, styles);
      writers.set(styles, w);
    }
    const out: [string, string][] = [];
    w.write(detail.decision, w.needsClock ? Date.now() : 0, out);
    for (let i = 0; i < out.length; i++) {
      const [k, v] = out[i] as [string, string];
      h[wireName(k)] = v;
    }
  }
  if (!s.allowed) h["retry-after"] = String(Math.max(1, toSeconds(s.retryAfterMs)));
  return h;
}

/** The middleware's default header style. */
export const DEFAULT_STYLES: readonly HeaderStyle[] = ["ietf"];
/** One HeaderWriter per set of limits and styles: they render the constant parts once. */
const WRITERS = new WeakMap<readonly ResolvedLimit[], Map<readonly HeaderStyle[], HeaderWriter>>();

/**
 * A check result as JSON, written out by hand: the fields are fixed and the numbers whole, and
 * JSON.stringify of the generic object was the largest single cost of a POST /v1/check after
 * node's own HTTP work (about 3 us). Strings still go through JSON.stringify for escaping. The
 * output is exactly what JSON.stringify would give (a test compares them).
 */
export function resultJson(r: CheckResult): string {
  let t = `{"allowed":${r.allowed},"domain":${JSON.stringify(r.domain)},"statuses":[`;
  for (let i = 0; i < r.statuses.length; i++) {
    const s = r.statuses[i] as DescriptorStatus;
    const e = s.explain;
    t +=
      `${i === 0 ? "" : ","}{"key":${JSON.stringify(s.key)},"allowed":${s.allowed},"overLimit":${s.overLimit},"shadow":${s.shadow},` +
      `"unlimited":${s.unlimited},"limit":${s.limit},"remaining":${s.remaining},"retryAfterMs":${s.retryAfterMs},` +
      `"resetAfterMs":${s.resetAfterMs},"delayMs":${s.delayMs},"windowMs":${s.windowMs},` +
      `"policy":${s.policy === null ? "null" : JSON.stringify(s.policy)},"reason":${s.reason === null ? "null" : JSON.stringify(s.reason)},` +
      `"explain":{"rule":${e.rule === null ? "null" : JSON.stringify(e.rule)},"source":"${e.source}","why":${JSON.stringify(e.why)}}}`;
  }
  return `${t}]}`;
}
