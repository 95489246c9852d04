/**
 * envoyproxy/ratelimit reads its config files with gopkg.in/yaml.v2 into Go structs
 * (src/config/config_impl.go), which reads two things differently from YAML 1.2 data, and
 * files that work there rely on both:
 * - a scalar read into a string field is its source text: `value: 200` is "200", `value: true`
 *   is "true", `key: 0x1F` is "0x1F" (a float is refused before that, by its key validation,
 *   so one is left for the schema to refuse here too);
 * - a field left empty (`value:`, `rate_limit:`, `descriptors:`, `shadow_mode:`) is the Go zero
 *   value: no value, no limit, no nested descriptors, false.
 * This rewrites a parsed document that way, in place, before it is turned into data: `key` and
 * `value` of descriptor nodes and `domain` (at the top or in a `domains:` entry) become their
 * text; empty fields of descriptor nodes and of `rate_limit` blocks (envoyproxy/ratelimit's keys
 * only) are dropped.
 */
import { isPair, isScalar, isSeq, visit, type Document } from "yaml";

/** envoyproxy/ratelimit's keys (its `validKeys`): only these are Go struct fields with a zero value. */
const GO_KEYS = new Set([
  "value",
  "descriptors",
  "rate_limit",
  "unit",
  "requests_per_unit",
  "unlimited",
  "shadow_mode",
  "quota_mode",
  "name",
  "replaces",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "metadata",
]);

/** YAML 1.2 core integers (what yaml.v2 also reads as an int, and so accepts as text). */
const INT = /^[-+]?(?:[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$/;

type Owner = "domain" | "node" | "rate_limit" | undefined;

/** Rewrites `doc` as yaml.v2 would read it into envoyproxy/ratelimit's structs (see above). */
export function readAsGoYaml(doc: Document): void {
  visit(doc, {
    Pair(_, pair, path) {
      if (!isScalar(pair.key)) return undefined;
      const key = String(pair.key.value);
      const owner = ownerOf(path);
      const value = pair.value;
      if (value === null || (isScalar(value) && value.value === null)) {
        // An empty key or domain stays empty, for the schema to name; so does an empty field of
        // ratekeeper's own form (`cost:`, `limit:`), which has no zero value to fall back on.
        const dropped = (owner === "node" || owner === "rate_limit") && GO_KEYS.has(key);
        return dropped ? visit.REMOVE : undefined;
      }
      const textField = owner === "node" ? key === "key" || key === "value" : owner === "domain" && key === "domain";
      if (!textField || !isScalar(value) || typeof value.source !== "string") return undefined;
      if (typeof value.value === "boolean" || (typeof value.value === "number" && INT.test(value.source))) value.value = value.source;
      return undefined;
    },
  });
}

/** Which map a pair is in, from the visitor's path of ancestors (…, pair, seq, map). */
function ownerOf(path: readonly unknown[]): Owner {
  const n = path.length;
  if (n === 2) return "domain"; // the top of a file in envoyproxy/ratelimit's form
  const above = path[n - 2];
  if (isPair(above) && isScalar(above.key) && above.key.value === "rate_limit") return "rate_limit";
  const list = path[n - 3];
  if (!isSeq(above) || !isPair(list) || !isScalar(list.key)) return undefined;
  if (list.key.value === "descriptors") return "node";
  return list.key.value === "domains" && n === 4 ? "domain" : undefined;
}
