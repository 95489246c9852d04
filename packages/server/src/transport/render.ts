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
  const flat = limitHeaderList(statuses, styles, []);
  const h: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) h[flat[i] as string] = flat[i + 1] as string;
  return h;
}

/**
 * {@link limitHeaders} as a flat list of names and values, appended to `out` (and returned):
 * what `writeHead(status, list)` takes as is. The decision routes write their answers so, with
 * `content-type` and `content-length` appended: no object is built, copied and walked per answer.
 */
export function limitHeaderList(statuses: readonly DescriptorStatus[], styles: readonly HeaderStyle[], out: string[]): string[] {
  const s = decisive(statuses);
  if (s === undefined) return out;
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
    // One scratch list for the writer's pairs: it is read back at once, before anything else runs.
    const pairs = PAIRS;
    pairs.length = 0;
    w.write(detail.decision, w.needsClock ? Date.now() : 0, pairs);
    const from = out.length;
    for (let i = 0; i < pairs.length; i++) {
      const [k, v] = pairs[i] as [string, string];
      const name = wireName(k);
      // Two styles can name the same header (ietf and draft-7 both send RateLimit): the later
      // value replaces the earlier in its place, as when these were the keys of one object.
      const at = styles.length > 1 ? out.indexOf(name, from) : -1;
      if (at !== -1 && (at - from) % 2 === 0) out[at + 1] = v;
      else out.push(name, v);
    }
  }
  if (!s.allowed) out.push("retry-after", String(Math.max(1, toSeconds(s.retryAfterMs))));
  return out;
}

const PAIRS: [string, string][] = [];

/** The middleware's default header style. */
export const DEFAULT_STYLES: readonly HeaderStyle[] = ["ietf"];
/** One HeaderWriter per set of limits and styles: they render the constant parts once. */
const WRITERS = new WeakMap<readonly ResolvedLimit[], Map<readonly HeaderStyle[], HeaderWriter>>();

/**
 * A check result as JSON, written out by hand: the fields are fixed and the numbers whole, and
 * JSON.stringify of the generic object was the largest single cost of a POST /v1/check after
 * node's own HTTP work (about 3 us). Strings are quoted by {@link str}. The output is exactly
 * what JSON.stringify would give (a test compares them).
 */
export function resultJson(r: CheckResult): string {
  let t = `{"allowed":${r.allowed},"domain":${str(r.domain)},"statuses":[`;
  for (let i = 0; i < r.statuses.length; i++) {
    const s = r.statuses[i] as DescriptorStatus;
    const e = s.explain;
    t +=
      `${i === 0 ? "" : ","}{"key":${str(s.key)},"allowed":${s.allowed},"overLimit":${s.overLimit},"shadow":${s.shadow},` +
      `"unlimited":${s.unlimited},"limit":${s.limit},"remaining":${s.remaining},"retryAfterMs":${s.retryAfterMs},` +
      `"resetAfterMs":${s.resetAfterMs},"delayMs":${s.delayMs},"windowMs":${s.windowMs},` +
      `"policy":${s.policy === null ? "null" : str(s.policy)},"reason":${s.reason === null ? "null" : str(s.reason)},` +
      `"explain":{"rule":${e.rule === null ? "null" : str(e.rule)},"source":"${e.source}","why":${str(e.why)}}}`;
  }
  return `${t}]}`;
}

/**
 * Characters JSON.stringify writes escaped: `"`, backslash, controls, and surrogates (a lone one is
 * escaped; a pair is not, but any surrogate sends the string the slow way, which is still right).
 */
// eslint-disable-next-line no-control-regex -- the control characters are what must be found
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * `JSON.stringify(s)` for a string: one that needs no escaping (nearly all: keys, rule names, the
 * explanation) is put between quotes as it is. JSON.stringify cost 270 ns on the 75-character
 * explanation, the regex test and the quotes 125 ns; a result has six strings per status.
 */
function str(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}
