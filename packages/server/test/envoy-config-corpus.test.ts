/**
 * envoyproxy/ratelimit's own config files (unmodified copies, test/fixtures/envoy-ratelimit, see
 * its SOURCES.md) through `ratekeeper config check`, file by file, against that project's
 * verdict: the files its tests load and accept are accepted; each file its tests expect to fail
 * (test/config/config_test.go, `expectConfigPanic`) is refused with an error naming the same
 * problem. Directories as its runtime directory: a domain in two files is a duplicate, or merged
 * with MERGE_DOMAIN_CONFIG=true, where the same descriptor in both is a duplicate.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, ROOT } from "./support.js";

const CORPUS = path.join(ROOT, "packages/server/test/fixtures/envoy-ratelimit");
const at = (rel: string) => path.join(CORPUS, rel);

/** Files envoyproxy/ratelimit accepts (its config tests, integration tests and examples load them). */
const ACCEPTED = [
  "test/config/basic_config.yaml",
  "test/config/duplicate_domain.yaml", // alone: it is a duplicate only next to basic_config.yaml
  "test/config/merge_domain_key1.yaml",
  "test/config/merge_domain_key2.yaml",
  "test/config/metadata.yaml",
  "test/config/shadowmode_config.yaml",
  "test/config/share_threshold.yaml",
  "test/config/wildcard.yaml",
  "integration/config/basic.yaml",
  "integration/config/another.yaml",
  "integration/config/share_threshold.yaml",
  "integration/reload.yaml",
  "examples/config.yaml",
  "examples/example.yaml",
];

/** Files it refuses, with its error (config_test.go) and what ours must say. */
const REFUSED: ReadonlyArray<readonly [string, string, RegExp]> = [
  ["test/config/bad_limit_unit.yaml", "invalid rate limit unit 'foo'", /rate_limit\.unit: must be second, minute/],
  ["test/config/bad_yaml.yaml", "error loading config file: yaml: line 2: found unexpected end of stream", /bad_yaml\.yaml:2:\d+: /],
  ["test/config/duplicate_key.yaml", "duplicate descriptor composite key 'test-domain.key1_value1'", /duplicate descriptor key1=value1/],
  ["test/config/empty_domain.yaml", "config file cannot have empty domain", /domains\[0\]\.domain: /],
  ["test/config/empty_key.yaml", "descriptor has empty key", /descriptors\[0\]\.key: /],
  ["test/config/misspelled_key.yaml", "config error, unknown key 'ratelimit'", /unknown key 'ratelimit'/],
  ["test/config/misspelled_key2.yaml", "config error, unknown key 'requestsperunit'", /Unrecognized key: "requestsperunit"/],
  [
    "test/config/non_map_list.yaml",
    "yaml file contains list of type other than map: a",
    /descriptors\[0\]: Invalid input: expected object/,
  ],
  ["test/config/non_string_key.yaml", "config error, key is not of type string: 0.25", /"0\.25"/],
  ["test/config/replaces_empty.yaml", "should not have an empty replaces entry", /should not have an empty replaces entry/],
  [
    "test/config/replaces_self.yaml",
    "replaces should not contain name of same descriptor",
    /replaces should not contain name of same descriptor/,
  ],
  [
    "test/config/unlimited_with_unit.yaml",
    "should not specify rate limit unit when unlimited",
    /should not specify rate limit unit when unlimited/,
  ],
];

let dir: string;
let plain: { status: number | null; stdout: string; stderr: string };
let merged: { status: number | null; stdout: string; stderr: string };

/** A directory holding copies of corpus files (`[name in the directory, corpus file]`). */
function directory(name: string, files: ReadonlyArray<readonly [string, string]>): string {
  const d = path.join(dir, name);
  mkdirSync(d, { recursive: true });
  for (const [to, from] of files) copyFileSync(at(from), path.join(d, to));
  return d;
}

function check(paths: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [CLI, "config", "check", ...paths], { encoding: "utf8", env: { ...process.env, ...env } });
}

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-envoy-corpus-"));
  // One process per environment, every file in it: starting the CLI is most of the time.
  const dupDomain = directory("dup-domain", [
    ["basic_config.yaml", "test/config/basic_config.yaml"],
    ["duplicate_domain.yaml", "test/config/duplicate_domain.yaml"],
  ]);
  const integration = directory("runtime/current/ratelimit/config", [
    ["basic.yaml", "integration/config/basic.yaml"],
    ["another.yaml", "integration/config/another.yaml"],
    ["share_threshold.yaml", "integration/config/share_threshold.yaml"],
  ]);
  plain = check([...ACCEPTED.map(at), ...REFUSED.map(([f]) => at(f)), dupDomain, integration]);
  const merge = directory("merge", [
    ["merge_domain_key1.yaml", "test/config/merge_domain_key1.yaml"],
    ["merge_domain_key2.yaml", "test/config/merge_domain_key2.yaml"],
  ]);
  const mergeDup = directory("merge-dup", [
    ["a.yaml", "test/config/merge_domain_key1.yaml"],
    ["b.yaml", "test/config/merge_domain_key1.yaml"],
  ]);
  merged = check([merge, mergeDup], { MERGE_DOMAIN_CONFIG: "true" });
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("envoyproxy/ratelimit's config files through `config check`", () => {
  it.each(ACCEPTED)("accepts %s, as envoyproxy/ratelimit does", (file) => {
    expect(plain.stdout).toContain(`${at(file)}: ok (1 domains,`);
    expect(plain.stderr).not.toContain(at(file));
  });

  it.each(REFUSED)("refuses %s (envoyproxy/ratelimit: %s)", (file, _theirs, ours) => {
    const lines = plain.stderr.split("\n").filter((l) => l.startsWith(`${at(file)}:`));
    expect(lines.length, plain.stderr).toBeGreaterThan(0);
    expect(lines.join("\n")).toMatch(ours);
    expect(plain.stdout).not.toContain(`${at(file)}: ok`);
  });

  it("exits 1 when any is refused", () => {
    expect(plain.status).toBe(1);
  });

  it("a directory: its runtime layout is read whole; a domain in two files is a duplicate (duplicate_domain.yaml)", () => {
    expect(plain.stdout).toContain(`${path.join(dir, "runtime/current/ratelimit/config")}: ok (3 domains, 11 rules,`);
    expect(plain.stderr).toContain(
      `${path.join(dir, "dup-domain", "duplicate_domain.yaml")}: domain: duplicate domain 'test-domain' in config file`,
    );
  });

  it("MERGE_DOMAIN_CONFIG=true: one domain merged over two files; the same descriptor twice is a duplicate", () => {
    expect(merged.stdout).toContain(`${path.join(dir, "merge")}: ok (1 domains, 2 rules,`);
    expect(merged.stderr).toContain("duplicate descriptor composite key 'test-domain.key1_value1'");
    expect(merged.status).toBe(1);
  });
});
