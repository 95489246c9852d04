import type { ResolvedLimit } from "ratekeeper";
import { HeaderWriter, toSeconds, wireName, type HeaderStyle } from "ratekeeper/http";
import { endAscii, jsonString, startAscii } from "../json-text.js";
import { DecisionExplain } from "../service/explain.js";
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
  clock: () => number = Date.now,
): Record<string, string> {
  const flat = limitHeaderList(statuses, styles, [], clock);
  const h: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) h[flat[i] as string] = flat[i + 1] as string;
  return h;
}

/**
 * {@link limitHeaders} as a flat list of names and values, appended to `out` (and returned):
 * what `writeHead(status, list)` takes as is. The decision routes write their answers so, with
 * `content-type` and `content-length` appended: no object is built, copied and walked per answer.
 * @param clock what `X-RateLimit-Reset` (an epoch time) adds the wait to: the limiters' clock when
 *   they were given one (`DecisionService.limiterClock`), else the process's
 */
export function limitHeaderList(
  statuses: readonly DescriptorStatus[],
  styles: readonly HeaderStyle[],
  out: string[],
  clock: () => number = Date.now,
): string[] {
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
    // A new list per answer: emptying a shared one (`length = 0`) is a call into V8's runtime.
    const pairs: [string, string][] = [];
    w.write(detail.decision, w.needsClock ? clock() : 0, pairs);
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

/** The middleware's default header style. */
export const DEFAULT_STYLES: readonly HeaderStyle[] = ["ietf"];
/** One HeaderWriter per set of limits and styles: they render the constant parts once. */
const WRITERS = new WeakMap<readonly ResolvedLimit[], Map<readonly HeaderStyle[], HeaderWriter>>();

/** A JSON answer and its length in UTF-8 bytes (its `content-length`). */
export interface JsonBody {
  readonly text: string;
  readonly bytes: number;
}

/**
 * A check result as JSON, written out by hand: the fields are fixed and the numbers whole, and
 * JSON.stringify of the generic object was the largest single cost of a POST /v1/check after
 * node's own HTTP work (about 3 us). What a rule's explanations share is rendered once per rule
 * (service/explain.ts), the four flags once per combination; per check only the key, numbers and
 * names are written. The output is exactly what JSON.stringify would give (a test compares them
 * over generated results, with names that need escaping).
 */
export function resultJson(r: CheckResult): string {
  let t = `{"allowed":${r.allowed},"domain":${jsonString(r.domain)},"statuses":[`;
  for (let i = 0; i < r.statuses.length; i++) t += (i === 0 ? "" : ",") + statusJson(r.statuses[i] as DescriptorStatus);
  return `${t}]}`;
}

/**
 * {@link resultJson} with its byte length: when every string in it was plain ASCII (nearly
 * always), its length, without counting (see json-text.ts).
 */
export function resultBody(r: CheckResult): JsonBody {
  startAscii();
  const text = resultJson(r);
  return { text, bytes: endAscii() ? text.length : Buffer.byteLength(text) };
}

function statusJson(s: DescriptorStatus): string {
  const e = s.explain;
  const explain =
    e instanceof DecisionExplain
      ? e.json()
      : `{"rule":${e.rule === null ? "null" : jsonString(e.rule)},"source":"${e.source}","why":${jsonString(e.why)}}`;
  const flags = FLAGS[(s.allowed ? 1 : 0) | (s.overLimit ? 2 : 0) | (s.shadow ? 4 : 0) | (s.unlimited ? 8 : 0)] as string;
  return (
    `{"key":${jsonString(s.key)},${flags}${s.limit},"remaining":${s.remaining},"retryAfterMs":${s.retryAfterMs},` +
    `"resetAfterMs":${s.resetAfterMs},"delayMs":${s.delayMs},"windowMs":${s.windowMs},` +
    `"policy":${s.policy === null ? "null" : jsonString(s.policy)},"reason":${s.reason === null ? "null" : jsonString(s.reason)},` +
    `"explain":${explain}}`
  );
}

/** A status's four flags and the name of the field after them, per combination (bit 1 allowed, 2 overLimit, 4 shadow, 8 unlimited). */
const FLAGS = Array.from(
  { length: 16 },
  (_, i) => `"allowed":${(i & 1) !== 0},"overLimit":${(i & 2) !== 0},"shadow":${(i & 4) !== 0},"unlimited":${(i & 8) !== 0},"limit":`,
);
