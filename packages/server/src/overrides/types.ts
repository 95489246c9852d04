import type { LimitSpec } from "ratekeeper";

/**
 * A per-key override: "user:241531" may make 5 requests a second while everyone else gets the
 * rule's default. It replaces the policy of the rule that matched.
 * - `limits`: a policy of its own (any algorithm and options, the library's own spec objects);
 * - `"unlimited"`: never limited (a temporary boost without bound);
 * - `"blocked"`: always denied (a temporary block).
 */
export interface Override {
  /** Rule domain (Envoy-style) the override applies in. */
  readonly domain: string;
  /**
   * The descriptor key it applies to, in the canonical form the service builds from a
   * descriptor's entries (see service/descriptor-key.ts), e.g. `user_id=241531`, or a plain key
   * sent to `POST /v1/check`.
   */
  readonly key: string;
  readonly policy: { readonly limits: readonly LimitSpec[] } | "unlimited" | "blocked";
  /** Optional expiry, ms since the epoch: after it the override is ignored and dropped. */
  readonly expiresAtMs?: number | undefined;
  /** Free text: who set it and why. */
  readonly note?: string | undefined;
}

/**
 * What the decision service's hot path asks, synchronously, on every check. Implementations
 * answer from an in-memory cache (the database is never on the hot path).
 */
export interface OverrideLookup {
  /** The live (not expired at `nowMs`) override for `domain` and `key`, if any. */
  get(domain: string, key: string, nowMs: number): Override | undefined;
}

/**
 * An override as the store holds it: with the change-feed `version` it was written at (a
 * per-store counter that only grows; version order is commit order) and its write time.
 */
export interface StoredOverride extends Override {
  /** Store-wide change counter at the write; caches resume their change feed from it. */
  readonly version: number;
  /** When it was last written, ms since the epoch (the writer's clock). */
  readonly updatedAtMs: number;
}

/** One entry of the change feed: an upsert (`override` set) or a deletion (`override` undefined). */
export interface OverrideChange {
  readonly version: number;
  readonly domain: string;
  readonly key: string;
  /** The override as written, or undefined when it was deleted (or its expiry was purged). */
  readonly override: StoredOverride | undefined;
}

/** A page of the change feed, oldest first. */
export interface ChangeBatch {
  readonly changes: readonly OverrideChange[];
  /**
   * Deletions at or below this version have been forgotten (tombstones are purged after a
   * retention period). A reader whose last seen version is below it must reload everything.
   */
  readonly horizon: number;
}

/** Options for {@link OverrideStore.list}. */
export interface ListOverridesOptions {
  /** Only this domain. */
  readonly domain?: string | undefined;
  /** Only keys starting with this prefix. */
  readonly keyPrefix?: string | undefined;
  /** Opaque cursor from a previous page's `nextCursor`. */
  readonly cursor?: string | undefined;
  /** Page size. @default 100 (at most 1000) */
  readonly limit?: number | undefined;
  /** Leave out overrides expired at this time (ms since the epoch). */
  readonly liveAtMs?: number | undefined;
}

/** A page of overrides in a stable order (domain, then key, byte-wise). */
export interface OverridePage {
  readonly items: readonly StoredOverride[];
  /** Pass as `cursor` to get the next page; undefined on the last page. */
  readonly nextCursor: string | undefined;
}

/** What a change-feed subscriber is told: something changed at or after `version`. */
export interface ChangeSignal {
  /** The version the change was written at, when known. */
  readonly version?: number | undefined;
  /** Set after the feed was interrupted and restored: the subscriber must resynchronise. */
  readonly resync?: boolean | undefined;
}

/**
 * The durable configuration store behind the overrides:
 * SQLite in a file (embedded default) or PostgreSQL (shared by many instances). The hot path
 * never calls it: an {@link OverrideLookup} cache loads everything and follows `changesSince`.
 */
export interface OverrideStore {
  /** `"sqlite"` or `"postgres"`. */
  readonly kind: "sqlite" | "postgres";
  /** Where it lives, with any password removed (for logs). */
  readonly description: string;
  /** The override for `domain` and `key`, expired or not; undefined when there is none. */
  get(domain: string, key: string): Promise<StoredOverride | undefined>;
  /**
   * Creates an override; fails with {@link OverrideConflictError} when a live one already
   * exists (an expired one is replaced). `nowMs` decides what is expired.
   */
  create(override: Override, nowMs: number): Promise<StoredOverride>;
  /** Replaces an existing override; undefined (and nothing written) when there is none. */
  update(override: Override): Promise<StoredOverride | undefined>;
  /** Creates or replaces. */
  put(override: Override): Promise<StoredOverride>;
  /** Creates or replaces many in one transaction (bulk import); returns how many were written. */
  putMany(overrides: readonly Override[]): Promise<number>;
  /**
   * Deletes; false when there was none. With `onlyPolicy`, only an override with that policy,
   * checked in the same transaction (unblock: a block, not what another admin put in its place).
   */
  delete(domain: string, key: string, onlyPolicy?: "blocked" | "unlimited"): Promise<boolean>;
  /** A page of overrides, in a stable order (keyset paging: no row is skipped or repeated). */
  list(options?: ListOverridesOptions): Promise<OverridePage>;
  /** The highest version written so far (0 for an empty store). */
  currentVersion(): Promise<number>;
  /**
   * Live (not deleted) overrides after `after` (a `[domain, key]` position; undefined: from the
   * start) in (domain, key) order, at most `limit`, expired ones included. The fast path for a
   * full load: a primary-key range scan, unlike `changesSince`, which walks the version index.
   */
  scan(after: readonly [string, string] | undefined, limit: number): Promise<StoredOverride[]>;
  /** Changes with a version above `afterVersion`, oldest first, at most `limit`. */
  changesSince(afterVersion: number, limit: number): Promise<ChangeBatch>;
  /**
   * Turns overrides expired at `nowMs` into deletions on the change feed, and forgets
   * deletions older than `tombstoneRetentionMs`. Returns how many of each.
   */
  purge(nowMs: number, tombstoneRetentionMs: number): Promise<{ expired: number; tombstones: number }>;
  /**
   * The change feed: calls `listener` when something changed (in this process or, for
   * PostgreSQL, in any instance; for SQLite, another process's writes are found by polling).
   * For a write made through this store object, the write's promise resolves only after the
   * promises the listeners return: a cache that returns its catch-up promise gives
   * read-your-writes (the admin API answers after the local cache has the change).
   * @returns a function that unsubscribes
   */
  watch(listener: (signal: ChangeSignal) => void | Promise<void>): () => void;
  /** Stops the feed and closes connections. */
  close(): Promise<void>;
}

/** Thrown by {@link OverrideStore.create} when a live override already exists for the key. */
export class OverrideConflictError extends Error {
  override readonly name = "OverrideConflictError";
  readonly code = "ERR_RATEKEEPER_OVERRIDE_EXISTS";
  constructor(
    readonly domain: string,
    readonly key: string,
  ) {
    super(`an override for ${JSON.stringify(key)} in domain ${JSON.stringify(domain)} already exists`);
  }
}
