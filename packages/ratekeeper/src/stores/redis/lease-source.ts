import { describeValue, RateLimitStoreError } from "../../core/errors.js";
import type { BlockOutcome } from "../../core/lease-block.js";
import type { ResolvedLease } from "../../core/lease-options.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { BlockSource } from "../leased-table.js";
import { counterFits } from "./counter.js";
import { fastForeignMarker, foreignValueError } from "./foreign-value.js";
import { keyPart } from "./key-part.js";
import { loadScript, type LoadedScript } from "./scripts.js";
import type { RedisStore } from "./store.js";

/** An instance counts as a lessee of a key for this many block lives after its last take. */
const LESSEE_BLOCKS = 4;

/**
 * Blocks of a key's allowance from Redis (scripts/lease.lua): one script call per take or give
 * back, on the key's own state (the same key and encoding as the per-decision script, so leased
 * and unleased limiters of one policy share the allowance) and hash slot, with its lessees
 * (`:L`) and its reset epoch (`:e`, raised by the per-decision script's reset).
 */
export class RedisBlockSource implements BlockSource {
  private readonly script: LoadedScript = loadScript("lease", []);
  private readonly head: string;
  private readonly tail: string[];
  /** This process's id among a key's lessees. */
  private readonly id = globalThis.crypto.randomUUID();
  private readonly horizon: string;
  /** Lessees of the last take, for stats and tests. */
  lessees = 0;

  constructor(
    private readonly store: RedisStore,
    lim: ResolvedLimit,
    namespace: string,
    lease: ResolvedLease,
  ) {
    // The key of the limit's state as ratekeeper.lua writes it (script-format.ts), so both share it.
    this.head = `${store.prefix}{${keyPart(namespace)}:`;
    const kind = lim.algorithm !== "fixed-window" ? "b" : lim.alignFirst ? "F" : counterFits(lim, store.minTtlMs) ? "n" : "f";
    this.tail = [kind, String(lim.limit), String(lim.windowMs), String(lim.capacity), String(store.minTtlMs)];
    this.horizon = String(LESSEE_BLOCKS * lease.blockMs);
  }

  async take(key: string, want: number, nowMs: number | undefined): Promise<BlockOutcome> {
    const head = `${this.head}${key}`;
    const args = ["t", nowMs === undefined ? "" : String(nowMs), ...this.tail, String(want), this.id, this.horizon];
    const r = await this.store.ask(this.script, [`${head}}`, `${head}}:L`, `${head}}:e`], args);
    const bad = fastForeignMarker(r);
    if (bad !== undefined) {
      // The waiting decisions go to the unleased table (LeasedTable.failed), whose script refuses
      // a foreign state as this one did, and reports it; a foreign lessees or epoch key is not
      // that script's to read (its decisions are made there, exactly): reported here.
      const err = foreignValueError(bad);
      if (!bad.startsWith(`${head}}: `)) this.store.report(err, { op: "lease", key, timedOut: false });
      throw err;
    }
    if (!Array.isArray(r) || r.length !== 8)
      throw new RateLimitStoreError(`RedisStore lease "${key}": unexpected script reply ${describeValue(r)}`);
    this.lessees = Number(r[5]);
    return {
      taken: Number(r[0]),
      validMs: Number(r[1]),
      waitMs: Number(r[2]),
      resetAfterMs: Number(r[3]),
      blockStart: Number(r[4]),
      left: Number(r[6]),
      epoch: Number(r[7]),
    };
  }

  /** A decision waiting for a take waits for Redis: counted toward `maxPending` (its refusal is counted by the per-decision call that follows). */
  enter(): boolean {
    return this.store.enter(true);
  }

  leave(): void {
    this.store.leave();
  }

  async give(key: string, units: number, blockStart: number, epoch: number, nowMs: number | undefined): Promise<void> {
    const head = `${this.head}${key}`;
    const args = ["g", nowMs === undefined ? "" : String(nowMs), ...this.tail, String(units), String(blockStart), String(epoch)];
    const r = await this.store.ask(this.script, [`${head}}`, `${head}}:L`, `${head}}:e`], args);
    // A foreign value: nothing given back (the units are lost, as for any failed give-back); the
    // key's next take finds it and reports it.
    const bad = fastForeignMarker(r);
    if (bad !== undefined) throw foreignValueError(bad);
  }
}
