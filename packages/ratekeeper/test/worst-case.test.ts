import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { formatWorstCases, worstCase, WORST_CASE_ALGORITHMS } from "../src/simulate/worst-case.js";

// The worst cases docs/algorithms.md states, measured by the algorithms' own code (see worstCase).
describe("worst rolling-window over-admission, measured", () => {
  const results = WORST_CASE_ALGORITHMS.map((algorithm) => worstCase({ limit: 5, window: "10s", algorithm }));
  const by = (label: string) => results.find((r) => r.label === label);

  it("5 per 10 s: the fixed window and the sliding tail admit 10 in a rolling 10 s; the log and GCRA (burst 0) exactly 5", () => {
    expect(by("fixed-window")).toMatchObject({ units: 10, attack: { spanMs: 2 } });
    expect(by("fixed-window align=first-request")?.units).toBe(9);
    expect(by("sliding-window")?.units).toBe(10); // the Quick start's algorithm (the sliding tail)
    expect(by("sliding-window buckets=10")?.units).toBe(10);
    expect(by("sliding-window buckets=10 weighted=false")?.units).toBe(10);
    expect(by("sliding-log")?.units).toBe(5);
    expect(by("token-bucket")?.units).toBe(9);
    expect(by("leaky-bucket")?.units).toBe(9);
    expect(by("leaky-bucket mode=shape")).toMatchObject({ units: 9, proceeding: 5 });
    expect(by("gcra")?.units).toBe(5);
    expect(by("gcra burst=4")?.units).toBe(9);
  });

  it("docs/algorithms.md carries this table as measured", () => {
    const doc = readFileSync(new URL("../../../docs/algorithms.md", import.meta.url), "utf8");
    expect(doc).toContain(formatWorstCases(results));
  });
});
