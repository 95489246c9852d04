import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { Readable, type Writable } from "node:stream";
import { once } from "node:events";
import { PAST_EXPIRY, parseOverride, pastExpiry, toDocument } from "./schema.js";
import type { Override, OverrideStore } from "./types.js";

/** One bad line of an import. */
export interface ImportProblem {
  /** 1-based line number. */
  readonly line: number;
  /** Path within the line's document, e.g. `limits[0].window`, or `(line)` for unreadable JSON. */
  readonly path: string;
  readonly message: string;
}

/** Options for {@link importOverrides}. */
export interface ImportOptions {
  /** Wall clock for `ttl` fields, ms since the epoch. @default Date.now() */
  readonly nowMs?: number;
  /** Overrides written per transaction. @default 10000 */
  readonly batchSize?: number;
  /** Only validate; write nothing. @default false */
  readonly dryRun?: boolean;
  /** Stop collecting problems after this many (the count still covers every line). @default 100 */
  readonly maxProblems?: number;
  /**
   * Skip (and count) lines whose `expiresAtMs` is already past, writing the others. Otherwise
   * such a line is a problem like any other, and nothing is written. @default false
   */
  readonly skipExpired?: boolean;
  /** Called after each batch is written, with the running total. */
  readonly onProgress?: (written: number) => void;
  /** Called with each valid line's override as the file is validated (a dry run too), with its line number. */
  readonly onValid?: (line: number, override: Override) => void;
}

/** What an import did. */
export interface ImportResult {
  /** Non-blank lines read. */
  readonly lines: number;
  /** Overrides written (0 when any line was bad, or on a dry run). */
  readonly written: number;
  /** The first `maxProblems` problems, with line numbers. */
  readonly problems: readonly ImportProblem[];
  /** Lines with at least one problem. */
  readonly badLines: number;
  /** Lines whose `expiresAtMs` was already past: skipped with `skipExpired`, else among the bad lines. */
  readonly expired: number;
  /** The line numbers of the first `maxProblems` of them. */
  readonly expiredLines: readonly number[];
}

/**
 * A line that was valid when the file was validated is not when it is written: the file changed
 * between the two reads. The batches before it are committed (re-running the import is safe).
 */
export class ImportChangedError extends Error {
  override readonly name = "ImportChangedError";
  constructor(
    readonly line: number,
    problem: ImportProblem | undefined,
    readonly written: number,
  ) {
    super(
      `line ${line}: ${problem ? `${problem.path}: ${problem.message}: ` : ""}the file changed since it was validated; ` +
        `${written} overrides were written by the batches before it (re-running the import is safe)`,
    );
  }
}

/** Where import lines come from: a file path (read twice: validate, then write) or a stream (held in memory). */
export type ImportSource = { readonly path: string } | { readonly stream: Readable };

async function* lines(openStream: () => Readable): AsyncGenerator<[number, string]> {
  const rl = createInterface({ input: openStream(), crlfDelay: Infinity });
  let n = 0;
  for await (const line of rl) {
    n++;
    if (line.trim() !== "") yield [n, line];
  }
}

/**
 * Imports overrides from JSON lines (one document per line, as `overrides export` writes; see
 * `parseOverride` for the shape). Every line is validated first, and nothing is written unless
 * every line is good; then the overrides are written in transactions of `batchSize` (a bulk
 * `INSERT ... SELECT FROM unnest(...)` on PostgreSQL), so a million lines take seconds, not
 * a million round trips. The last line for a (domain, key) wins. With `dryRun` the store may be
 * undefined: nothing is opened or written. A line whose `expiresAtMs` is already past is a problem
 * (it would never apply, and would replace its key's override); `skipExpired` skips them instead.
 * @example await importOverrides(store, { path: "overrides.jsonl" })
 */
export async function importOverrides(
  store: OverrideStore | undefined,
  source: ImportSource,
  options: ImportOptions = {},
): Promise<ImportResult> {
  // A dry run validates only, so it needs no store (opening an SQLite one would create it).
  if (store === undefined && options.dryRun !== true) throw new TypeError("importOverrides: a store is required unless dryRun");
  const batchSize = options.batchSize ?? 10_000;
  const open = await opener(source);
  const lp = new LineParser(options.nowMs ?? Date.now(), options.maxProblems ?? 100, options.skipExpired === true);
  let count = 0;
  for await (const [n, line] of lines(open)) {
    count++;
    const o = lp.parse(n, line);
    if (o !== undefined && o !== SKIP) options.onValid?.(n, o);
  }
  const result = () => ({ lines: count, problems: lp.problems, badLines: lp.badLines, expired: lp.expired, expiredLines: lp.expiredLines });
  if (lp.badLines > 0 || options.dryRun || store === undefined) return { ...result(), written: 0 };
  // The second pass counts them again.
  lp.expired = 0;
  lp.expiredLines = [];

  let written = 0;
  let batch: Override[] = [];
  for await (const [n, line] of lines(open)) {
    const o = lp.parse(n, line);
    // A file read twice can change in between (still being written, or edited): a line that
    // turned bad must not be skipped in silence (nor reported as if nothing had been written).
    if (!o) throw new ImportChangedError(n, lp.problems[lp.problems.length - 1], written);
    if (o === SKIP) continue;
    batch.push(o);
    if (batch.length >= batchSize) {
      written += await store.putMany(batch);
      batch = [];
      options.onProgress?.(written);
    }
  }
  if (batch.length > 0) {
    written += await store.putMany(batch);
    options.onProgress?.(written);
  }
  return { ...result(), written };
}

/** Opens the source's lines anew for each pass: a file is read again, a stream's lines are held. */
async function opener(source: ImportSource): Promise<() => Readable> {
  if ("path" in source) {
    const path = source.path;
    return () => createReadStream(path, { encoding: "utf8" });
  }
  // A stream can be read once: keep its lines (about 100 bytes each) for the second pass.
  const held: string[] = [];
  const rl = createInterface({ input: source.stream, crlfDelay: Infinity });
  for await (const line of rl) held.push(line);
  return () => Readable.from(held.map((l) => `${l}\n`));
}

/** Reads import lines into overrides, keeping their problems and the lines already expired. */
class LineParser {
  readonly problems: ImportProblem[] = [];
  badLines = 0;
  expired = 0;
  expiredLines: number[] = [];

  constructor(
    private readonly nowMs: number,
    private readonly maxProblems: number,
    private readonly skipExpired: boolean,
  ) {}

  /** The line's override; SKIP for an expired one with `skipExpired`; undefined for a bad line. */
  parse(n: number, line: string): Override | typeof SKIP | undefined {
    let doc: unknown;
    try {
      doc = JSON.parse(line);
    } catch (e) {
      this.bad(n, [{ path: "(line)", message: `not valid JSON: ${(e as Error).message}` }]);
      return undefined;
    }
    const r = parseOverride(doc, { nowMs: this.nowMs, allowPastExpiry: this.skipExpired });
    if (r.ok) {
      if (!this.skipExpired || pastExpiry(r.override.expiresAtMs, this.nowMs) === undefined) return r.override;
      this.sawExpired(n);
      return SKIP;
    }
    if (r.issues.some((i) => i.path === "expiresAtMs" && i.message.startsWith(PAST_EXPIRY))) this.sawExpired(n);
    this.bad(n, r.issues);
    return undefined;
  }

  private bad(n: number, issues: readonly { path: string; message: string }[]): void {
    this.badLines++;
    for (const i of issues) if (this.problems.length < this.maxProblems) this.problems.push({ line: n, path: i.path, message: i.message });
  }

  private sawExpired(n: number): void {
    this.expired++;
    if (this.expiredLines.length < this.maxProblems) this.expiredLines.push(n);
  }
}

/** What {@link importOverrides}' parse answers for a line it skips. */
const SKIP = Symbol("skip");

/** Options for {@link exportOverrides}. */
export interface ExportOptions {
  /** Only this domain. */
  readonly domain?: string | undefined;
  /** Leave out overrides expired at this time (ms since the epoch). @default Date.now() */
  readonly liveAtMs?: number;
  /**
   * Told of each override left out because import would refuse it, with import's problems as one
   * text, and whether they are all of its stored policy (`limits` or `policy`; else a key, a note
   * or an expiry import refuses).
   */
  readonly onSkipped?: (override: Override, problem: string, policyOnly: boolean) => void;
}

/**
 * Writes every live override as JSON lines, in (domain, key) order, page by page (keyset
 * paging, so concurrent writes never make it skip or repeat a row). Returns how many. An override
 * {@link importOverrides} would refuse (a row edited by hand whose stored policy is no policy:
 * the service ignores it too) is left out and given to `onSkipped`: what is written imports back.
 * @example await exportOverrides(store, process.stdout)
 */
export async function exportOverrides(store: OverrideStore, out: Writable, options: ExportOptions = {}): Promise<number> {
  let cursor: string | undefined;
  let n = 0;
  const liveAtMs = options.liveAtMs ?? Date.now();
  do {
    const page = await store.list({ domain: options.domain, cursor, limit: 1000, liveAtMs });
    let chunk = "";
    for (const o of page.items) {
      const doc = toDocument(o);
      // As import reads it back, but for an expiry that may pass before the import.
      const r = parseOverride(doc, { nowMs: liveAtMs, allowPastExpiry: true });
      if (!r.ok) {
        const policyOnly = r.issues.every((i) => /^(limits|policy)\b/.test(i.path));
        options.onSkipped?.(o, r.issues.map((i) => `${i.path}: ${i.message}`).join("; "), policyOnly);
        continue;
      }
      chunk += `${JSON.stringify(doc)}\n`;
      n++;
    }
    if (chunk !== "" && !out.write(chunk)) await once(out, "drain");
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return n;
}
