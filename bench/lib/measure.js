// Throughput and allocation measurement shared by the bench sections.
//
// Every call is awaited one after the other, as a request handler would: `await fn(key)`.
// A call that rejects (rate-limiter-flexible rejects on a denial) is caught inside the loop, as a
// user's try/catch would. Each case gets its own loop function compiled with `new Function`, so
// V8's inline caches at the `fn(key)` call site see only that case: a shared loop would turn
// megamorphic after the second implementation and penalise whoever runs later.

import v8 from "node:v8";
import { summarize } from "./stats.js";

/**
 * A freshly compiled timing loop: `(fn, keys, n) => Promise<[wall ns, CPU ns]>`. CPU time is the
 * process's user + system time (`process.cpuUsage()`): on a shared machine it leaves out the time
 * the process waited for a core, so it is the steadier measure; wall time is what a caller sees.
 * `sync`: the calls are not awaited (for synchronous APIs measured against each other; the loop
 * still returns a promise).
 */
export function compileLoop(sync = false) {
  const call = sync ? "fn(keys[k]);" : "try { await fn(keys[k]); } catch { /* a denial as a rejection (rate-limiter-flexible) */ }";
  // eslint-disable-next-line no-new-func
  return new Function(
    "fn",
    "keys",
    "n",
    `return (async () => {
      const m = keys.length;
      let k = 0;
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) {
        ${call}
        if (++k === m) k = 0;
      }
      const wall = Number(process.hrtime.bigint() - t0);
      const c = process.cpuUsage(c0);
      return [wall, (c.user + c.system) * 1000];
    })();`,
  );
}

/**
 * A case to measure.
 * @typedef {object} Case
 * @property {string} id           unique id (for lookups in the results)
 * @property {string} group        scenario it belongs to (cases are alternated within a group)
 * @property {string} impl         implementation label (a table row)
 * @property {string[]} keys       keys to cycle through
 * @property {() => Promise<(key: string) => unknown>} setup  builds an instance, prefills it, returns the call
 * @property {(call: (key: string) => unknown, keys: string[]) => Promise<string | undefined>} [check]
 *           after a sample: returns an error message if the traffic was not what the label says
 * @property {() => void} [teardown] releases the instance: its timers, and the references the case's closures
 *           keep to it (the cases outlive their group; an instance left holding 100,000 keys would
 *           weigh on the collections of every later group)
 * @property {boolean} [sync]     the call is synchronous and is timed without `await`
 */

/**
 * Measures each group of cases in turn. Within a group every case gets one unrecorded warm-up
 * sample (which also sizes its samples to about `sampleMs`), then `runs` recorded rounds in
 * which the order of the implementations rotates (and flips every other round), so ours and the
 * peers take turns at whatever the shared machine was doing. One instance per case lives for
 * the whole group (steady state: its keys are all present), and is dropped before the next group.
 * @param {Case[]} cases
 * @param {{ runs: number, sampleMs: number, log?: (s: string) => void }} opts
 * @returns {Promise<Map<string, { cpu: ReturnType<typeof summarize>, wall: ReturnType<typeof summarize>, n: number, problems: string[] }>>}
 *          calls per second of CPU time (`cpu`) and of wall time (`wall`)
 */
export async function runCases(cases, { runs, sampleMs, log = () => {} }) {
  const out = new Map();
  const groups = [...new Set(cases.map((c) => c.group))];
  for (const g of groups) {
    const inGroup = cases.filter((c) => c.group === g);
    const st = new Map();
    await settle();
    for (const c of inGroup) {
      const call = await c.setup();
      const loop = compileLoop(c.sync === true);
      const probeN = Math.max(50_000, c.keys.length);
      await loop(call, c.keys, probeN);
      const [ns] = await loop(call, c.keys, probeN);
      const n = Math.max(20_000, Math.round((probeN / ns) * sampleMs * 1e6));
      st.set(c.id, { call, loop, n, wall: [], cpu: [], problems: [] });
    }
    await settle();
    for (let round = 0; round < runs; round++) {
      const shift = round % inGroup.length;
      const order = [...inGroup.slice(shift), ...inGroup.slice(0, shift)];
      if (round % 2 === 1) order.reverse();
      for (const c of order) {
        const s = st.get(c.id);
        // A minor collection only: a full one over this group's heap (hundreds of MB with 100,000
        // keys per instance) leaves concurrent sweeping running into the next sample, which then
        // pays for it on a 2-core machine (measured: the empty async call ran 5x slower).
        globalThis.gc?.({ type: "minor" });
        const [wallNs, cpuNs] = await s.loop(s.call, c.keys, s.n);
        s.wall.push((s.n / wallNs) * 1e9);
        s.cpu.push((s.n / cpuNs) * 1e9);
        if (c.check) {
          const msg = await c.check(s.call, c.keys);
          if (msg && !s.problems.includes(msg)) s.problems.push(msg);
        }
      }
    }
    for (const c of inGroup) {
      const s = st.get(c.id);
      out.set(c.id, { cpu: summarize(s.cpu), wall: summarize(s.wall), n: s.n, problems: s.problems });
      c.teardown?.();
    }
    st.clear();
    await settle();
    // The heap left after the group released its instances: what the next group starts with.
    log(`${g}: done, heap ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MB after it`);
  }
  return out;
}

/** A full collection, then a pause so V8's concurrent sweeping finishes before anything is timed. */
async function settle() {
  if (!globalThis.gc) return;
  globalThis.gc();
  await new Promise((r) => setTimeout(r, 300));
}

function newSpaceUsed() {
  for (const s of v8.getHeapSpaceStatistics()) if (s.space_name === "new_space") return s.space_used_size;
  return NaN;
}

/**
 * Bytes allocated on the JS heap per call, from the growth of V8's new space over `n` calls with
 * no collection in between (needs `--expose-gc` and a new space large enough for `n` calls, e.g.
 * `--max-semi-space-size=128 --min-semi-space-size=128`). Young objects are bump-allocated, so the
 * growth is what the calls allocated. Retries with fewer calls when a scavenge got in the way.
 * @returns {Promise<number>} bytes per call (median of several clean batches), or NaN
 */
export async function bytesPerCall(call, keys, n = 20_000) {
  const loop = compileLoop();
  await loop(call, keys, Math.max(n, keys.length)); // warm up and settle the instance
  await loop(call, keys, Math.max(n, keys.length));
  const clean = [];
  for (let attempt = 0; attempt < 20 && clean.length < 5; attempt++) {
    globalThis.gc?.();
    const before = newSpaceUsed();
    await loop(call, keys, n);
    const after = newSpaceUsed();
    if (after >= before) clean.push((after - before) / n);
    else n = Math.max(1000, n >> 1); // a scavenge ran: the numbers mean nothing, try a smaller batch
  }
  if (clean.length === 0) return NaN;
  clean.sort((a, b) => a - b);
  return clean[clean.length >> 1];
}

/** Like {@link bytesPerCall} for a synchronous call, not awaited (the store's part of the hot path). */
export function bytesPerCallSync(call, keys, n = 20_000) {
  // eslint-disable-next-line no-new-func
  const loop = new Function(
    "fn",
    "keys",
    "n",
    // The results go to a sink so escape analysis cannot drop the allocation of an unused result.
    `const m = keys.length; let k = 0; const sink = [undefined];
     for (let i = 0; i < n; i++) { sink[0] = fn(keys[k]); if (++k === m) k = 0; }
     return sink[0];`,
  );
  loop(call, keys, Math.max(n, keys.length) * 5);
  const clean = [];
  for (let attempt = 0; attempt < 20 && clean.length < 5; attempt++) {
    globalThis.gc?.();
    const before = newSpaceUsed();
    loop(call, keys, n);
    const after = newSpaceUsed();
    if (after >= before) clean.push((after - before) / n);
    else n = Math.max(1000, n >> 1);
  }
  if (clean.length === 0) return NaN;
  clean.sort((a, b) => a - b);
  return clean[clean.length >> 1];
}
