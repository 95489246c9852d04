/**
 * Reads the small files `serve` is given for secrets and certificates (`--admin-token-file`, the
 * Redis TLS files) without ever hanging the start. Such a file is often a pipe: process
 * substitution (`--admin-token-file <(vault read ...)`) hands a secret over without a file on
 * disk, so pipes are read, not refused (unlike rules files). But a named pipe nobody writes to
 * made a plain read wait for good, before the service listened or said anything; and a device
 * that never ends (/dev/zero) was read until memory ran out.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";

/** How long a pipe's writer has to write what it holds and close it. */
export const SECRET_WAIT_MS = 5000;

/** The largest such file read: a token or a certificate chain is a few KB. */
export const MAX_SECRET_BYTES = 64 * 1024;

/**
 * `file`'s text (UTF-8). Opened non-blocking: a pipe is read until its writer closes it, waiting
 * (polling every 10 ms, synchronously: nothing is served yet) at most `waitMs` for the writer and
 * its data.
 * @throws Error saying why: as the system says (ENOENT...), a directory, over {@link MAX_SECRET_BYTES},
 * or a pipe (or a terminal) whose writer did not write and close it within `waitMs`
 * @example const token = readSecretFile("/run/secrets/admin-token").trim();
 */
export function readSecretFile(file: string, waitMs: number = SECRET_WAIT_MS): string {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw new Error("it is a directory");
    return readAll(fd, stat, waitMs).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

function readAll(fd: number, stat: Stats, waitMs: number): Buffer {
  const chunks: Buffer[] = [];
  const buf = Buffer.alloc(16 * 1024);
  let total = 0;
  const untilMs = Date.now() + waitMs;
  for (;;) {
    const n = readOrAgain(fd, buf);
    if (n > 0) {
      total += n;
      if (total > MAX_SECRET_BYTES) throw new Error(`more than ${MAX_SECRET_BYTES} bytes: is it the right file?`);
      chunks.push(Buffer.from(buf.subarray(0, n)));
      continue;
    }
    // 0 is the end, but from a named pipe before any byte it only means no writer has opened it yet.
    if (n === 0 && (!stat.isFIFO() || total > 0)) return Buffer.concat(chunks);
    if (Date.now() >= untilMs) {
      const kind = stat.isFIFO() ? "a named pipe (FIFO)" : stat.isCharacterDevice() ? "a character device" : "a file";
      const what = total === 0 ? "nothing was written to it" : "its writer did not close it";
      throw new Error(`${kind}: ${what} within ${waitMs / 1000} s; write the secret to a regular file instead`);
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
  }
}

/** Bytes read into `buf`, 0 at the end, -1 when none are there yet (EAGAIN). */
function readOrAgain(fd: number, buf: Buffer): number {
  try {
    return readSync(fd, buf, 0, buf.length, null);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EAGAIN") return -1;
    throw e;
  }
}
