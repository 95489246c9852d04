/** The store contract (test/contract.ts) against the embedded MemoryStore. */
import { describe } from "vitest";
import { MemoryStore } from "../src/index.js";
import { storeContract } from "./contract.js";

describe("MemoryStore contract", () => {
  const store = new MemoryStore({ sweepIntervalMs: 0 });
  // MemoryStore keeps one table per bind(): two limiters never share state, whatever the namespace.
  storeContract({ store: () => store, sharedNamespaces: false });
});
