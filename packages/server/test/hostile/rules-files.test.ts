/**
 * Rules files and directories as operators and platforms leave them, read at start and by
 * `ratekeeper config check` (the same loader), where a file could be skipped, read half, read
 * wrong, or crash the process with a stack trace instead of a refusal naming the file:
 * - a file of a config directory with another extension (`ratelimit.conf`): read, as
 *   envoyproxy/ratelimit's runtime loader reads every file there (dotfiles, and so Kubernetes'
 *   `..data` and `..<timestamp>` entries, stay skipped);
 * - an empty directory: `config check` refuses it as `serve` does, unless --allow-empty-rules;
 * - a file of a directory larger than --max-rules-bytes: refused at start, as a single file is;
 * - a symlink loop, a symlink to nothing: a RulesError naming the link, not an ELOOP/ENOENT trace;
 * - bytes that are not UTF-8 (a file saved as Latin-1): refused naming the line, not read with
 *   U+FFFD in their place (a value that then never matches); a BOM and CRLF line ends are fine;
 * - a domain split over files with many wildcards (MERGE_DOMAIN_CONFIG): merged in linear time
 *   (the merge runs on the event loop on reload: two files of 8,000 wildcards took 13 s);
 * - a file with a large map (60,000 named policies, under the 4 MiB bound): parsed in linear time (bounds in CPU time)
 *   (the YAML library's duplicate-key check compares every key with every other: about 30 s, at
 *   start on the event loop), and a duplicate key still refused with its line.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadRulesFile, parseRules } from "../../src/config/load.js";
import { mergeRules } from "../../src/config/load-dir.js";
import { RulesError } from "../../src/config/rules.js";
import { CLI } from "../support.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), "rk-rules-files-"));
  dirs.push(d);
  return d;
}

/**
 * The CPU time `fn` takes, in ms: the bounds below tell linear from quadratic work, and CPU time
 * (of this test process, which runs one file at a time) stays near the work's own cost when a
 * loaded machine stretches the wall-clock time.
 */
function cpuMs(fn: () => void): number {
  const before = process.cpuUsage();
  fn();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

/** An envoyproxy/ratelimit file: domain `domain`, key `user` (value `value` when given) at 5 per minute. */
const envoyFile = (domain: string, value?: string) =>
  `domain: ${domain}\ndescriptors:\n  - key: user\n${value === undefined ? "" : `    value: ${value}\n`}    rate_limit: { unit: minute, requests_per_unit: 5 }\n`;

function cli(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 20_000, killSignal: "SIGKILL" });
}

/** The RulesError loading `p` throws (anything else fails the test). */
function refusal(p: string): RulesError {
  try {
    loadRulesFile(p);
  } catch (e) {
    if (e instanceof RulesError) return e;
    throw e;
  }
  throw new Error(`expected ${p} to be refused`);
}

describe("a config directory's files", () => {
  it("a file with another extension is read, as envoyproxy/ratelimit reads every file; dotfiles and ..data are not", () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "ratelimit.conf"), envoyFile("conf"));
    writeFileSync(path.join(dir, "api.yaml"), envoyFile("api"));
    // A ConfigMap volume: ..<timestamp>/ holds the files, ..data links to it; both skipped.
    mkdirSync(path.join(dir, "..2026_11_27_19_00_00.000000001"));
    writeFileSync(path.join(dir, "..2026_11_27_19_00_00.000000001", "x.yaml"), envoyFile("api"));
    symlinkSync("..2026_11_27_19_00_00.000000001", path.join(dir, "..data"));
    writeFileSync(path.join(dir, ".rules.yaml.swp"), "\u0000binary");
    expect([...loadRulesFile(dir).domains.keys()].sort()).toEqual(["api", "conf"]);
  });

  it("`config check` of an empty directory refuses it as `serve` does; --allow-empty-rules accepts it", () => {
    const dir = tempDir();
    const check = cli(["config", "check", dir]);
    expect(check.status, check.stdout).toBe(1);
    expect(check.stderr).toContain(`${dir}: has no domain, policy or pool`);
    const serve = cli(["serve", "--config", dir, "--port", "0", "--grpc-port", "0"]);
    expect(serve.status).not.toBe(0);
    expect(serve.stderr).toContain(`${dir}: has no domain, policy or pool`);
    const allowed = cli(["config", "check", "--allow-empty-rules", dir]);
    expect(allowed.status, allowed.stderr).toBe(0);
  });

  it("a file of a directory over --max-rules-bytes is refused at start and by `config check`, naming the file", () => {
    const dir = tempDir();
    const big = path.join(dir, "big.yaml");
    writeFileSync(big, envoyFile("big") + `# ${"x".repeat(5000)}\n`);
    const serve = cli(["serve", "--config", dir, "--port", "0", "--grpc-port", "0", "--max-rules-bytes", "4096"]);
    expect(serve.status).not.toBe(0);
    expect(serve.stderr).toMatch(new RegExp(`${big}: is \\d+ bytes, over the 4096-byte limit`));
    const check = cli(["config", "check", "--max-rules-bytes", "4096", dir]);
    expect(check.status).toBe(1);
    expect(check.stderr).toContain(`${big}: is `);
  });

  it("a symlink loop and a symlink to nothing are refused naming the link", () => {
    const loop = tempDir();
    writeFileSync(path.join(loop, "a.yaml"), envoyFile("a"));
    symlinkSync(".", path.join(loop, "again"));
    expect(refusal(loop).message).toMatch(new RegExp(`^${path.join(loop, "again")}: .*loop`));
    const dangling = tempDir();
    writeFileSync(path.join(dangling, "a.yaml"), envoyFile("a"));
    symlinkSync("gone.yaml", path.join(dangling, "b.yaml"));
    expect(refusal(dangling).message).toMatch(new RegExp(`^${path.join(dangling, "b.yaml")}: cannot read`));
    const check = cli(["config", "check", loop]);
    expect(check.status).toBe(1);
    expect(check.stderr).not.toContain("    at ");
  });
});

describe("a file's bytes", () => {
  it("bytes that are not UTF-8 are refused naming the line; a BOM and CRLF line ends are read", () => {
    const dir = tempDir();
    const latin1 = path.join(dir, "latin1.yaml");
    writeFileSync(latin1, envoyFile("a", "caf\u00e9"), "latin1");
    expect(refusal(latin1).message).toMatch(new RegExp(`^${latin1}:4:\\d+: .*not UTF-8`));
    const windows = path.join(dir, "windows.yaml");
    writeFileSync(windows, `\uFEFF${envoyFile("a", "café").replaceAll("\n", "\r\n")}`);
    const rules = loadRulesFile(windows);
    expect(rules.domains.get("a")?.exact.get("user")?.has("café")).toBe(true);
  });
});

describe("a domain split over files (MERGE_DOMAIN_CONFIG)", () => {
  it("two files of 8,000 wildcards each merge at once, and a wildcard in both is still a duplicate", () => {
    const file = (f: number, from = 0) => {
      let text = "domain: d\ndescriptors:\n";
      for (let i = from; i < 8000; i++)
        text += `  - key: path\n    value: /f${f}/p${i}*\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n`;
      return parseRules(text, `f${f}.yaml`);
    };
    const a = file(0);
    const b = file(1);
    let merged!: ReturnType<typeof mergeRules>;
    // Quadratic, this took about 15 s of CPU; linear, milliseconds.
    expect(cpuMs(() => (merged = mergeRules("dir", [a, b], true)))).toBeLessThan(2000);
    expect(merged.domains.get("d")?.wildcards).toHaveLength(16_000);
    expect(() => mergeRules("dir", [a, file(0, 7999)], true)).toThrow(/duplicate descriptor composite key 'd.path_\/f0\/p7999\*'/);
  });
});

describe("a large map", () => {
  it("60,000 named policies parse at once; a duplicate key is still refused naming its line", () => {
    let text = "policies:\n";
    for (let i = 0; i < 60_000; i++) text += `  p${i}: { algorithm: gcra, limit: 5, window: 1m }\n`;
    expect(text.length).toBeLessThan(4 * 1024 * 1024);
    // Quadratic, this took about 30 s of CPU; linear, 2-3 s.
    expect(cpuMs(() => expect(parseRules(text, "big.yaml").policies.size).toBe(60_000))).toBeLessThan(12_000);
    const dup = `${text}  p7: { algorithm: gcra, limit: 6, window: 1m }\n`;
    expect(() => parseRules(dup, "dup.yaml")).toThrow(/^dup\.yaml:60002:3: Map keys must be unique/);
    expect(() =>
      parseRules("policies:\n  a: { algorithm: gcra, limit: 1, window: 1m }\n  a: { algorithm: gcra, limit: 2, window: 1m }\n", "d.yaml"),
    ).toThrow(/^d\.yaml:3:3: Map keys must be unique/);
  });
});
