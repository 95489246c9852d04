/**
 * Per-key overrides (a configuration store of per-key limits): the store interface and its SQLite and
 * PostgreSQL backends, the in-memory cache the hot path asks, JSON-lines import/export, and the
 * admin API handler. See docs/overrides.md.
 * @example
 * import { openOverrideStore, OverrideCache } from "@ratekeeper/server";
 * const store = await openOverrideStore("sqlite:./data/overrides.db");
 * const cache = await OverrideCache.start(store);
 */
export {
  OverrideConflictError,
  type Override,
  type OverrideLookup,
  type OverrideStore,
  type StoredOverride,
  type OverrideChange,
  type ChangeBatch,
  type ChangeSignal,
  type ListOverridesOptions,
  type OverridePage,
} from "./types.js";
export { openOverrideStore, type OpenOverrideStoreOptions } from "./open.js";
export { SqliteOverrideStore, type SqliteOverrideStoreOptions } from "./sqlite.js";
export { PostgresOverrideStore, NOTIFY_CHANNEL, type PostgresOverrideStoreOptions, type ListenerEvent } from "./postgres.js";
export { OverrideCache, type OverrideCacheOptions } from "./cache.js";
export { parseOverride, toDocument, overrideDocumentSchema, type OverrideDocument, type ParseContext, type ParseResult } from "./schema.js";
export {
  importOverrides,
  exportOverrides,
  type ImportOptions,
  type ImportResult,
  type ImportProblem,
  type ImportSource,
  type ExportOptions,
} from "./jsonl.js";
