/**
 * A bad rules file is reported as compilers and linters do: `file:line:column: path: message`,
 * for YAML syntax errors and for every schema problem, so an editor or a terminal jumps to it.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseRules, RulesError } from "../../src/index.js";
import { CLI } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-hostile-rules-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function errorOf(text: string): RulesError {
  try {
    parseRules(text, "rules.yaml");
  } catch (e) {
    expect(e).toBeInstanceOf(RulesError);
    return e as RulesError;
  }
  throw new Error("expected a RulesError");
}

const BAD = `policies:
  login:
    algorithm: gcra
    limit: 5
    window: 1m
    burts: 2
domains:
  - domain: web
    descriptors:
      - key: remote_address
        algorithm: fixed-window
        limit: -3
        window: 1m
        capacity: 10
`;

describe("rules errors name file:line:column", () => {
  it("every schema problem points at its line and column", () => {
    const lines = errorOf(BAD).message.split("\n");
    expect(lines).toContain(
      'rules.yaml:6:5: policies.login.burts: unknown option for "gcra" (known: algorithm, limit, window, name, burst)',
    );
    expect(lines).toContainEqual(expect.stringMatching(/^rules\.yaml:12:9: domains\[0\]\.descriptors\[0\]\.limit: /));
    expect(lines).toContainEqual(expect.stringMatching(/^rules\.yaml:14:9: domains\[0\]\.descriptors\[0\]\.capacity: unknown option/));
  });

  it("a YAML syntax error points at its line and column", () => {
    const lines = errorOf("domains:\n  - domain: d\n    descriptors: [\n      - key: k\n").message.split("\n");
    expect(lines[0]).toMatch(/^rules\.yaml:4:7: /);
  });

  it("a missing field points at the entry that lacks it", () => {
    const lines = errorOf(
      "domains:\n  - domain: d\n    descriptors:\n      - key: k\n        algorithm: gcra\n        window: 1s\n",
    ).message.split("\n");
    expect(lines).toContainEqual(expect.stringMatching(/^rules\.yaml:4:9: domains\[0\]\.descriptors\[0\]\.limit: /));
  });

  it("the service refuses to start with the same file:line:column lines", () => {
    const file = path.join(dir, "bad.yaml");
    writeFileSync(file, BAD);
    const r = spawnSync(process.execPath, [CLI, "serve", "--config", file, "--port", "0", "--grpc-port", "0"], { encoding: "utf8" });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`${file}:6:5: policies.login.burts: unknown option`);
  });
});
