import type { ChangeSignal, Override, OverrideLookup, OverrideStore, StoredOverride } from "./types.js";

/** Options for {@link OverrideCache}. */
export interface OverrideCacheOptions {
  /** Wall clock, ms since the epoch (inject a manual one in tests). @default Date.now */
  readonly clock?: () => number;
  /** Rows read per query while loading and following the change feed. @default 10000 */
  readonly pageSize?: number;
  /**
   * How often to drop expired overrides from memory and (with `purgeStore`) turn them into
   * deletions in the store, in ms. 0 disables the timer (call {@link OverrideCache.purge}).
   * @default 60000
   */
  readonly purgeIntervalMs?: number;
  /** Whether the periodic purge also cleans the store (any one instance doing it is enough). @default true */
  readonly purgeStore?: boolean;
  /** How long deletions stay on the change feed before they are forgotten, in ms. @default 3600000 */
  readonly tombstoneRetentionMs?: number;
  /**
   * Belt and braces: how often to read the change feed even without a signal, in ms. 0 disables it.
   * @default 30000
   */
  readonly resyncIntervalMs?: number;
  /** Told about background failures (the cache keeps serving what it has and retries). */
  readonly onError?: (error: unknown, during: "sync" | "purge") => void;
}

/**
 * The in-memory copy of every override, answering {@link OverrideLookup.get} synchronously:
 * configuration changes rarely and a disk read per decision is expensive (the reasoning of Arpit
 * Bhayani's "Designing and implementing a sliding window based rate limiter"). Unlike that
 * article's read-through cache it holds *all*
 * overrides (loaded page by page at start), so a miss is an answer too and the database is
 * never on the hot path. It then follows the store's change feed: on every signal (a local
 * write, a PostgreSQL NOTIFY, a SQLite poll, a reconnect) it reads the changes after the last
 * version it has applied.
 * @example
 * const cache = await OverrideCache.start(store);
 * cache.get("api", "user_id=241531", Date.now());
 */
/**
 * Most lookups go to few keys: the front map remembers the answers (misses included, as null)
 * for up to this many recent keys, and is simply dropped when full (no LRU bookkeeping). A
 * lookup in a small map stays in the CPU caches; one in a million-entry map (tens of MB) misses
 * them, which measured about 2 µs a check on this shared 2-core machine.
 */
const FRONT_MAX_KEYS = 16_384;

/** One generation of the cache's contents: swapped whole after a full reload. */
class Generation {
  /** domain -> key -> override. Two levels so the hot path does not build a joined string. */
  readonly byDomain = new Map<string, Map<string, StoredOverride>>();
  /** domain -> key -> override or null (none): recent answers, see {@link FRONT_MAX_KEYS}. */
  front = new Map<string, Map<string, StoredOverride | null>>();
  frontSize = 0;
  /** Entries with an expiry, so the purge does not walk a million permanent overrides. */
  readonly expiring = new Set<StoredOverride>();
  count = 0;

  constructor(private readonly clock: () => number) {}

  /** Puts (`o` set) or removes (`o` undefined) the override for `domain` and `key`. */
  apply(domain: string, key: string, change: StoredOverride | undefined): void {
    // An override already expired is as good as deleted: do not spend memory on it.
    const o = change?.expiresAtMs !== undefined && change.expiresAtMs <= this.clock() ? undefined : change;
    this.front.get(domain)?.delete(key);
    let keys = this.byDomain.get(domain);
    const old = keys?.get(key);
    if (old !== undefined) {
      this.expiring.delete(old);
      if (o === undefined) {
        keys?.delete(key);
        this.count--;
        if (keys?.size === 0) this.byDomain.delete(domain);
        return;
      }
    }
    if (o === undefined) return;
    if (!keys) {
      keys = new Map();
      this.byDomain.set(domain, keys);
    }
    keys.set(key, o);
    if (old === undefined) this.count++;
    if (o.expiresAtMs !== undefined) this.expiring.add(o);
  }

  /** The override for `domain` and `key`, expired or not; through the front map. */
  lookup(domain: string, key: string): StoredOverride | undefined {
    // A table that fits in the front map is its own front map (and an empty one answers from
    // the tiny domain map without even hashing the key).
    if (this.count <= FRONT_MAX_KEYS) return this.byDomain.get(domain)?.get(key);
    let keys = this.front.get(domain);
    const hit = keys?.get(key);
    if (hit !== undefined) return hit ?? undefined;
    const o = this.byDomain.get(domain)?.get(key) ?? null;
    if (this.frontSize >= FRONT_MAX_KEYS) {
      this.front = new Map();
      this.frontSize = 0;
      keys = undefined;
    }
    if (keys === undefined) {
      keys = new Map();
      this.front.set(domain, keys);
    }
    keys.set(key, o);
    this.frontSize++;
    return o ?? undefined;
  }
}

/**
 * The in-memory copy of every override, answering {@link OverrideLookup.get} synchronously:
 * configuration changes rarely and a disk read per decision is expensive (the reasoning of Arpit
 * Bhayani's "Designing and implementing a sliding window based rate limiter"). Unlike that
 * article's read-through cache it holds *all*
 * overrides, so a miss is an answer too and the database is never on the hot path.
 *
 * Loading: note the store's current version V, scan every live override in primary-key order
 * (pages of `pageSize`), then apply the change feed after V (whatever changed during the scan),
 * and swap the new table in. Following: on every signal (a local write, a PostgreSQL NOTIFY, a
 * SQLite poll, a reconnect) read the changes after the last version applied. If the store has
 * forgotten deletions newer than that version (tombstones purged: its horizon passed), load again.
 * @example
 * const cache = await OverrideCache.start(store);
 * cache.get("api", "user_id=241531", Date.now());
 */
export class OverrideCache implements OverrideLookup {
  private table: Generation;
  private appliedVersion = 0;
  private loaded = false;
  private dirty = false;
  private loop: Promise<void> | undefined;
  private readonly clock: () => number;
  private readonly pageSize: number;
  private readonly timers: NodeJS.Timeout[] = [];
  private unwatch: (() => void) | undefined;
  private lastSyncAtMs = 0;
  private reloads = 0;

  private constructor(
    private readonly store: OverrideStore,
    private readonly options: OverrideCacheOptions,
  ) {
    this.clock = options.clock ?? Date.now;
    this.pageSize = options.pageSize ?? 10_000;
    this.table = new Generation(this.clock);
  }

  /**
   * Loads every override from `store`, then follows its change feed until {@link close}.
   * The timers are unref()'d: the cache never keeps a process alive.
   */
  static async start(store: OverrideStore, options: OverrideCacheOptions = {}): Promise<OverrideCache> {
    const cache = new OverrideCache(store, options);
    await cache.refresh();
    cache.unwatch = store.watch((s) => cache.onSignal(s));
    const purgeMs = options.purgeIntervalMs ?? 60_000;
    if (purgeMs > 0) cache.every(purgeMs, () => cache.purge().catch((e: unknown) => options.onError?.(e, "purge")));
    const resyncMs = options.resyncIntervalMs ?? 30_000;
    if (resyncMs > 0) cache.every(resyncMs, () => cache.refresh().catch((e: unknown) => options.onError?.(e, "sync")));
    return cache;
  }

  private every(ms: number, fn: () => unknown): void {
    const t = setInterval(fn, ms);
    t.unref();
    this.timers.push(t);
  }

  private onSignal(signal: ChangeSignal): Promise<void> | undefined {
    // A signal for a version already applied (our own write, already read back) needs no query.
    if (!signal.resync && signal.version !== undefined && signal.version <= this.appliedVersion) return undefined;
    return this.refresh().catch((e: unknown) => this.options.onError?.(e, "sync"));
  }

  /** The live override for `domain` and `key` at `nowMs`, if any. O(1), no I/O. */
  get(domain: string, key: string, nowMs: number): Override | undefined {
    const o = this.table.lookup(domain, key);
    if (o === undefined) return undefined;
    if (o.expiresAtMs !== undefined && o.expiresAtMs <= nowMs) return undefined;
    return o;
  }

  /** How many overrides are held (expired ones not yet purged included). */
  get size(): number {
    return this.table.count;
  }

  /** The highest change-feed version applied. */
  get version(): number {
    return this.appliedVersion;
  }

  /** How many full loads it has done (1 after start; more after the store forgot deletions it had not seen). */
  get fullLoads(): number {
    return this.reloads;
  }

  /** When the cache last finished reading the change feed, ms since the epoch (for readiness). */
  get lastSyncMs(): number {
    return this.lastSyncAtMs;
  }

  /**
   * Reads the change feed up to now. Concurrent calls share the work, and a call made while a
   * read is under way gets one more pass after it, so a caller that awaits `refresh()` after
   * its own write always finds that write applied (the admin API relies on this).
   */
  refresh(): Promise<void> {
    this.dirty = true;
    if (!this.loop) {
      this.loop = this.drain().finally(() => {
        this.loop = undefined;
      });
    }
    return this.loop;
  }

  private async drain(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      if (this.loaded) await this.catchUp();
      else await this.reload();
    }
    this.lastSyncAtMs = this.clock();
  }

  private async catchUp(): Promise<void> {
    const r = await this.follow(this.table, this.appliedVersion);
    if (r === "forgotten") await this.reload();
  }

  /** Applies the change feed after `from` to `table`; "forgotten" when deletions after `from` were purged. */
  private async follow(table: Generation, from: number): Promise<number | "forgotten"> {
    let version = from;
    for (;;) {
      const batch = await this.store.changesSince(version, this.pageSize);
      if (batch.horizon > version) return "forgotten";
      for (const c of batch.changes) table.apply(c.domain, c.key, c.override);
      const last = batch.changes[batch.changes.length - 1];
      if (last) version = last.version;
      if (table === this.table) this.appliedVersion = version;
      if (batch.changes.length < this.pageSize) return version;
    }
  }

  /** A full load into a new table (the hot path keeps answering from the old one meanwhile). */
  private async reload(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const fresh = new Generation(this.clock);
      const startVersion = await this.store.currentVersion();
      let after: readonly [string, string] | undefined;
      for (;;) {
        const page = await this.store.scan(after, this.pageSize);
        for (const o of page) fresh.apply(o.domain, o.key, o);
        const last = page[page.length - 1];
        if (!last || page.length < this.pageSize) break;
        after = [last.domain, last.key];
      }
      // What changed during the scan (versions after startVersion), deletions included.
      const version = await this.follow(fresh, startVersion);
      if (version === "forgotten" && attempt < 3) continue;
      this.table = fresh;
      this.appliedVersion = version === "forgotten" ? startVersion : version;
      this.loaded = true;
      this.reloads++;
      return;
    }
  }

  /**
   * Drops overrides expired at the clock's now from memory and, with `purgeStore` (default),
   * turns them into deletions in the store and forgets old deletions there.
   */
  async purge(): Promise<void> {
    const nowMs = this.clock();
    const table = this.table;
    for (const o of table.expiring) {
      if (o.expiresAtMs !== undefined && o.expiresAtMs <= nowMs) table.apply(o.domain, o.key, undefined);
    }
    if (this.options.purgeStore ?? true) {
      await this.store.purge(nowMs, this.options.tombstoneRetentionMs ?? 3_600_000);
    }
  }

  /** Stops following the store (the store itself stays open; close it separately). */
  close(): void {
    this.unwatch?.();
    this.unwatch = undefined;
    for (const t of this.timers) clearInterval(t);
    this.timers.length = 0;
  }
}
