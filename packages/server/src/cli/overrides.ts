import { createWriteStream } from "node:fs";
import { finished } from "node:stream/promises";
import { loadRulesFile } from "../config/load.js";
import { exportOverrides, ImportChangedError, importOverrides } from "../overrides/jsonl.js";
import { openOverrideStore } from "../overrides/open.js";
import type { Override } from "../overrides/types.js";
import { overrideWarnings } from "../transport/override-warnings.js";
import { UsageError, positive, str, type Command, type Values } from "./command.js";

function storeUrl(v: Values): string {
  const url = str(v.overrides) ?? process.env.RATEKEEPER_OVERRIDES;
  if (!url) throw new UsageError("--overrides: required (sqlite:./data/overrides.db or postgres://...) [env RATEKEEPER_OVERRIDES]");
  return url;
}

/** Control characters (C0, DEL, C1) and the Unicode line and paragraph separators. */
// eslint-disable-next-line no-control-regex -- what is looked for
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/**
 * `domain/key` as named on stderr: as it is, or as JSON when it holds a control character (a key
 * may hold any character a descriptor value can): a newline must not start a line of its own, a
 * terminal escape must not reach the terminal.
 * @example shownOverride({ domain: "d", key: "k=a\n" }) // '"d/k=a\\n"'
 */
function shownOverride(o: { domain: string; key: string }): string {
  const text = `${o.domain}/${o.key}`;
  if (!UNSAFE.test(text)) return text;
  // JSON escapes C0 only: DEL, C1 (0x9b is a terminal's CSI) and the separators too.
  return JSON.stringify(text).replace(/[\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** Warnings an import writes at most; then one line says how many there were. */
const MAX_WARNINGS = 100;

/**
 * With `--config`: what the admin API warns about each override (transport/override-warnings.ts),
 * written on stderr as `FILE:LINE: warning: domain/key: ...` (at most {@link MAX_WARNINGS}) by
 * `done()`, in line order, never failing the import. Only the last line of each (domain, key) is
 * warned about: it is the one stored (the last line wins), so an earlier line's warning would
 * describe an override that never exists. Held until the end for that: one map entry per key
 * that has warnings. Without: nothing.
 */
function importWarnings(configFile: string | undefined, name: string): { onValid?: (line: number, o: Override) => void; done(): void } {
  if (configFile === undefined) return { done() {} };
  const rules = loadRulesFile(configFile, { mergeDomains: process.env.MERGE_DOMAIN_CONFIG === "true" });
  const byKey = new Map<string, { line: number; shown: string; warnings: string[] }>();
  return {
    onValid(line, o) {
      const id = JSON.stringify([o.domain, o.key]);
      const warnings = overrideWarnings(rules, o);
      if (warnings.length > 0) byKey.set(id, { line, shown: shownOverride(o), warnings });
      else byKey.delete(id);
    },
    done() {
      let n = 0;
      for (const w of [...byKey.values()].sort((a, b) => a.line - b.line))
        for (const text of w.warnings) if (++n <= MAX_WARNINGS) process.stderr.write(`${name}:${w.line}: warning: ${w.shown}: ${text}\n`);
      if (n > MAX_WARNINGS) process.stderr.write(`overrides import: ${n} warnings (first ${MAX_WARNINGS} shown)\n`);
    },
  };
}

const URL_HELP = "URL  the overrides store: sqlite:./data/overrides.db or postgres://user@host/db [env RATEKEEPER_OVERRIDES]";

/**
 * `ratekeeper overrides import` and `ratekeeper overrides export`: bulk changes as JSON lines,
 * one override per line (the admin API's document: `{"domain","key","limits"|"policy",
 * "expiresAtMs"|"ttl","note"}`). Entries of the CLI's command table.
 */
export const OVERRIDES_COMMANDS: Command[] = [
  {
    words: ["overrides", "import"],
    args: "FILE|-",
    summary: "import overrides from JSON lines (- reads stdin); every line is validated first, nothing is written if any is bad",
    flags: {
      overrides: { type: "string" },
      "dry-run": { type: "boolean" },
      "skip-expired": { type: "boolean" },
      "batch-size": { type: "string" },
      config: { type: "string", short: "c" },
    },
    flagHelp: {
      overrides: URL_HELP,
      config:
        "PATH  the rules (file or directory) the service runs: warn about each override that admits less than one request of what its key costs under them (the admin API's warnings); never fails the import",
      "dry-run": "validate only; write nothing",
      "skip-expired": "skip (and report) lines whose expiresAtMs is already past; without it they are bad lines",
      "batch-size": "N  overrides per transaction [default 10000]",
    },
    async run(v, positionals) {
      const file = positionals[0];
      if (!file || positionals.length > 1) throw new UsageError("overrides import: give exactly one FILE, or - for stdin");
      const batchSize = positive(str(v["batch-size"]), "--batch-size");
      const dryRun = v["dry-run"] === true;
      const url = storeUrl(v);
      const name = file === "-" ? "stdin" : file;
      // Read before the store is opened: bad rules are a usage error that writes nothing.
      const warnings = importWarnings(str(v.config), name);
      // A dry run validates only: it opens no store (an SQLite one would be created).
      const store = dryRun ? undefined : await openOverrideStore(url);
      try {
        const started = Date.now();
        const result = await importOverrides(store, file === "-" ? { stream: process.stdin } : { path: file }, {
          batchSize,
          dryRun,
          skipExpired: v["skip-expired"] === true,
          onValid: warnings.onValid,
          onProgress: (n) => {
            if (n % 100_000 < (batchSize ?? 10_000)) process.stderr.write(`overrides import: ${n} written\n`);
          },
        }).catch((e: unknown) => {
          if (!(e instanceof ImportChangedError)) throw e;
          process.stderr.write(`overrides import: ${name}: ${e.message}\n`);
          return undefined;
        });
        if (result === undefined) return 1;
        warnings.done();
        if (result.badLines > 0) {
          for (const p of result.problems) process.stderr.write(`${name}:${p.line}: ${p.path}: ${p.message}\n`);
          const more = result.badLines > result.problems.length ? ` (first ${result.problems.length} problems shown)` : "";
          process.stderr.write(`overrides import: ${result.badLines} of ${result.lines} lines are bad${more}; nothing was written\n`);
          if (result.expired > 0) {
            // --skip-expired skips only those: with other bad lines the import would still refuse the file.
            const others = result.badLines - result.expired;
            const then = others > 0 ? `fix the other ${others} bad line${others === 1 ? "" : "s"}, then ` : "";
            process.stderr.write(
              `overrides import: ${result.expired} of them expired already; ${then}--skip-expired imports the other lines and skips those\n`,
            );
          }
          return 1;
        }
        if (result.expired > 0) {
          const more = result.expired > result.expiredLines.length ? ", ..." : "";
          process.stderr.write(
            `overrides import: skipped ${result.expired} lines whose expiresAtMs is already past (lines ${result.expiredLines.join(", ")}${more})\n`,
          );
        }
        const what = store
          ? `${result.written} overrides written to ${store.description}`
          : `${result.lines} lines valid (dry run: nothing written)`;
        process.stdout.write(`${name}: ${what} in ${Date.now() - started} ms\n`);
        return 0;
      } finally {
        await store?.close();
      }
    },
  },
  {
    words: ["overrides", "export"],
    args: "[FILE]",
    summary: "write every live override as JSON lines, in (domain, key) order, to FILE or stdout",
    flags: {
      overrides: { type: "string" },
      domain: { type: "string" },
    },
    flagHelp: {
      overrides: URL_HELP,
      domain: "NAME  only this domain",
    },
    async run(v, positionals) {
      if (positionals.length > 1) throw new UsageError("overrides export: give at most one FILE");
      const file = positionals[0];
      const store = await openOverrideStore(storeUrl(v), { create: false });
      try {
        const out = file && file !== "-" ? createWriteStream(file) : process.stdout;
        let skipped = 0;
        const onSkipped = (o: Override, problem: string, policyOnly: boolean): void => {
          skipped++;
          const why = policyOnly ? "its stored policy is not one the library takes" : "import would refuse it";
          process.stderr.write(`overrides export: skipped ${shownOverride(o)}: ${why} (${problem}); fix or delete that row\n`);
        };
        const n = await exportOverrides(store, out, { domain: str(v.domain), onSkipped });
        if (out !== process.stdout) {
          out.end();
          await finished(out);
        }
        const more = skipped > 0 ? `; ${skipped} unreadable row${skipped === 1 ? "" : "s"} skipped` : "";
        process.stderr.write(`overrides export: ${n} overrides from ${store.description}${more}\n`);
        return 0;
      } finally {
        await store.close();
      }
    },
  },
];
