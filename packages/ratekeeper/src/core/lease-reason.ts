/**
 * Why a lease answer came out as it did, when it was not a plain grant:
 * - `limit`: every slot of the key was held.
 * - `store-error`: the store failed or timed out; its failure policy (`open` / `closed`) answered.
 * - `degraded`: the store's Redis was down; this process answered from its own share of the limit.
 * - `insurance`: the store's Redis was down; its insurance store answered.
 * - `overloaded`: the store refused to hold more (too many keys, or too many calls waiting).
 */
export type LeaseReason = "limit" | "store-error" | "degraded" | "insurance" | "overloaded";
