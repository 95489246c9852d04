/**
 * Where a problem sits in a rules file: the line and column of the node an issue path
 * (`domains[0].descriptors[2].limit`, `policies.login.burst`) names in the parsed YAML document.
 * A path that runs past what the file has (a missing field) points at the deepest node found:
 * the entry that lacks it.
 */
import { isMap, isScalar, isSeq, type Document, type LineCounter } from "yaml";
import type { SourcePosition } from "./rules.js";

/**
 * @param doc the document parsed with `lines` as its line counter
 * @returns the 1-based line and column, or undefined when the document has no content
 */
export function positionOf(doc: Document, lines: LineCounter, path: string): SourcePosition | undefined {
  let node: unknown = doc.contents;
  let offset = (node as { range?: [number, number, number] } | null)?.range?.[0];
  let rest = path;
  while (rest.length > 0) {
    if (rest.startsWith("[")) {
      const m = /^\[(\d+)\]/.exec(rest);
      if (!m || !isSeq(node)) break;
      const item = node.items[Number(m[1])] as { range?: [number, number, number] } | undefined;
      if (item === undefined) break;
      node = item;
      offset = item.range?.[0] ?? offset;
      rest = rest.slice(m[0].length);
      continue;
    }
    if (rest.startsWith(".")) rest = rest.slice(1);
    if (!isMap(node)) break;
    // Keys may hold dots (policy names): take the longest key the rest starts with.
    let found: { key: string; keyOffset: number | undefined; value: unknown } | undefined;
    for (const pair of node.items) {
      if (!isScalar(pair.key)) continue;
      const key = String(pair.key.value);
      const next = rest.charAt(key.length);
      if (!rest.startsWith(key) || (next !== "" && next !== "." && next !== "[")) continue;
      if (found === undefined || key.length > found.key.length) found = { key, keyOffset: pair.key.range?.[0], value: pair.value };
    }
    if (found === undefined) break;
    offset = found.keyOffset ?? offset;
    node = found.value;
    rest = rest.slice(found.key.length);
  }
  if (offset === undefined) return undefined;
  const { line, col } = lines.linePos(offset);
  return { line, col };
}
