import { Session } from "node:inspector/promises";
import { writeFileSync } from "node:fs";
globalThis.__snap = async () => {
  const s = new Session(); s.connect();
  const chunks = [];
  s.on("HeapProfiler.addHeapSnapshotChunk", (m) => chunks.push(m.params.chunk));
  await s.post("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
  const snap = JSON.parse(chunks.join(""));
  const m = snap.snapshot.meta; const nf = m.node_fields.length; const types = m.node_types[0];
  const nodes = snap.nodes, strings = snap.strings;
  const agg = new Map();
  for (let i = 0; i < nodes.length; i += nf) { const t = types[nodes[i]]; const name = t === "object" || t === "closure" ? `${t}:${strings[nodes[i + 1]]}` : t; const size = nodes[i + 3]; const a = agg.get(name) ?? [0, 0]; a[0]++; a[1] += size; agg.set(name, a); }
  console.log("live objects by kind (count, KB):");
  for (const [k, [c, sz]] of [...agg].sort((a, b) => b[1][1] - a[1][1]).slice(0, 30)) console.log(String(c).padStart(8), (sz / 1024).toFixed(0).padStart(7), k);
};
