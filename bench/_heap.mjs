import { Session } from "node:inspector/promises";
const s = new Session(); s.connect();
await s.post("HeapProfiler.enable");
await s.post("HeapProfiler.startSampling", { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
globalThis.__stopHeap = async (n) => {
  const { profile } = await s.post("HeapProfiler.stopSampling");
  const self = new Map();
  const walk = (node) => { const cf = node.callFrame; const k = `${cf.functionName || "(anon)"} ${cf.url.replace(/.*node_modules\//, "nm/").replace(/.*packages\//, "")}:${cf.lineNumber}`; self.set(k, (self.get(k) ?? 0) + node.selfSize); node.children.forEach(walk); };
  walk(profile.head);
  let total = 0; for (const v of self.values()) total += v;
  console.log(`allocated ${(total / n).toFixed(0)} B/decision`);
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(String((v / n).toFixed(0)).padStart(6), k);
};
