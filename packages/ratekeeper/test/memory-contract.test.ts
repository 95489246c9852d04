/** The store contract (test/contract.ts) against the embedded MemoryStore. */
import { describe } from "vitest";
import { MemoryStore } from "../src/index.js";
import { concurrencyContract } from "./concurrency-contract.js";
import { storeContract } from "./contract.js";

describe("MemoryStore contract", () => {
  const store = new MemoryStore({ sweepIntervalMs: 0 });
  // Like Redis: limiters with the same namespace and policy share a table.
  storeContract({ store: () => store });
  concurrencyContract({ store: () => store });
});
