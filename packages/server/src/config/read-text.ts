/**
 * Reads a rules file's text, at start, by `config check` and on reload alike: at most `maxBytes`
 * (a larger file is refused without being read whole, even one that grows while it is read), and
 * strictly as UTF-8, as envoyproxy/ratelimit's YAML reader (yaml.v2) takes it: a byte that is not
 * UTF-8 (a file saved as Latin-1) is refused naming its line, where Node's own decoding would put
 * U+FFFD in its place and a `value: café` would silently never match. A BOM is dropped.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";
import { RulesError } from "./rules.js";

/** The largest rules file read by default, in bytes (the CLI's --max-rules-bytes). */
export const MAX_RULES_BYTES = 4 * 1024 * 1024;

/** A file's text, with the stat of the file it was read from (taken before reading). */
export interface RulesText {
  readonly text: string;
  readonly stat: Stats;
}

/**
 * Reads `file` (symlinks followed) as UTF-8, refusing it when it is, or grows to, over `maxBytes`,
 * and when it is not a regular file. It is opened non-blocking: opening a named pipe (FIFO) for
 * reading otherwise waits for a writer, on the event loop, which at a reload stops the service
 * answering at all; a pipe, device or socket is refused by its type before a byte is read.
 * @throws RulesError naming the file: unreadable, not a regular file, too large, or not UTF-8 (with the line)
 * @example const { text } = readRulesText("rules.yaml", MAX_RULES_BYTES);
 */
export function readRulesText(file: string, maxBytes: number = MAX_RULES_BYTES): RulesText {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw cannotRead(file, e);
  }
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw new RulesError(file, [{ path: "", message: "cannot read: it is a directory" }]);
    if (!stat.isFile()) throw notAFile(file, stat);
    if (stat.size > maxBytes) throw tooLarge(file, stat.size, maxBytes);
    return { text: decodeUtf8(readUpTo(fd, stat.size, maxBytes, file), file), stat };
  } catch (e) {
    throw e instanceof RulesError ? e : cannotRead(file, e);
  } finally {
    closeSync(fd);
  }
}

/** Reads to the end, but never more than one byte past `maxBytes`: a file that grew past the bound since its stat is refused. */
function readUpTo(fd: number, sizeHint: number, maxBytes: number, file: string): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const chunk = Buffer.allocUnsafe(Math.min(maxBytes + 1 - total, Math.max(sizeHint - total, 0) + 64 * 1024));
    const got = readSync(fd, chunk, 0, chunk.length, null);
    if (got === 0) return Buffer.concat(chunks, total);
    chunks.push(chunk.subarray(0, got));
    total += got;
    if (total > maxBytes) throw tooLarge(file, total, maxBytes);
  }
}

const STRICT = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** `bytes` as UTF-8 text (BOM dropped); a byte sequence that is not UTF-8 is refused with its line and column. */
function decodeUtf8(bytes: Buffer, file: string): string {
  try {
    return STRICT.decode(bytes);
  } catch {
    // Find the first bad byte: the longest prefix that decodes is where it starts.
    const loose = bytes.toString("utf8");
    const at = loose.indexOf("\uFFFD");
    const before = loose.slice(0, Math.max(at, 0));
    const line = before.split("\n").length;
    const col = before.length - before.lastIndexOf("\n");
    throw new RulesError(
      file,
      [{ path: "", message: "is not UTF-8 text (a file saved as Latin-1 or UTF-16?): save it as UTF-8" }],
      [{ line, col }],
    );
  }
}

/** What a path that is not a regular file or a directory is, in words. */
function kindOf(stat: Stats): string {
  if (stat.isFIFO()) return "a named pipe (FIFO)";
  if (stat.isCharacterDevice()) return "a character device";
  if (stat.isBlockDevice()) return "a block device";
  if (stat.isSocket()) return "a socket";
  return "of another kind";
}

function notAFile(file: string, stat: Stats): RulesError {
  const message = `is ${kindOf(stat)}, not a regular file: rules are read from a regular file or a directory of them`;
  return new RulesError(file, [{ path: "", message }]);
}

function cannotRead(file: string, e: unknown): RulesError {
  return new RulesError(file, [{ path: "", message: `cannot read: ${(e as Error).message}` }]);
}

/** The refusal of a rules file of `size` bytes, over the bound `maxBytes` (at start and on reload, for a file or a directory's file). */
export function tooLarge(file: string, size: number, maxBytes: number): RulesError {
  return new RulesError(file, [
    { path: "", message: `is ${size} bytes, over the ${maxBytes}-byte limit (raise it with --max-rules-bytes)` },
  ]);
}
