/**
 * A descriptor key longer than 512 characters is counted under its bounded form (its first 440
 * characters, `#sha256:` and the SHA-256 of the whole; service/descriptor-key.ts `boundedKey`). A
 * client can send that form itself as a value and reach the long key's counter: no preimage is
 * needed, only the long key, which it could have sent outright. docs/security.md says so.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import { boundedKey } from "../../src/service/descriptor-key.js";
import { REQUEST_CAPS } from "../../src/service/request-caps.js";

const YAML = `
domains:
  - domain: d
    descriptors:
      - key: path
        algorithm: fixed-window
        limit: 1
        window: 1m
`;

describe("a value equal to a long key's bounded form reaches that key's counter", () => {
  it("the long value (Envoy's RLS) and its bounded form (short enough for POST /v1/check) share one counter", async () => {
    const svc = new DecisionService({ store: new MemoryStore(), rules: parseRules(YAML, "r.yaml"), clock: () => 1e6, injectClock: true });
    const long = `/${"a".repeat(700)}`;
    const crafted = boundedKey(`path=${long}`).slice("path=".length);
    expect(crafted.length).toBeLessThanOrEqual(REQUEST_CAPS.valueChars);
    const check = (value: string) => svc.decide({ domain: "d", descriptors: [[{ key: "path", value }]] });
    expect((await check(long)).allowed).toBe(true);
    const denied = await check(crafted);
    expect(denied.allowed).toBe(false);
    expect(denied.statuses[0]?.key).toBe(boundedKey(`path=${long}`));
    // Another long value keeps its own counter.
    expect((await check(`${long}b`)).allowed).toBe(true);
  });
});
