/**
 * What `ratekeeper serve` does with an error nothing catches (a bug, a library's callback that
 * throws, a promise rejected with no handler). Node's own handling prints the stack on stderr and
 * exits at once: one who reads only the JSON log (a log shipper, a container's log driver keeping
 * stdout) never learns why the service vanished, and lines held for a slow stdout are lost.
 */
import { closeLog, logStopping, type Logger } from "../log.js";

/**
 * From now on, an uncaught exception or unhandled rejection is logged as one `fatal` line
 * ("uncaught exception: stopping" or "unhandled rejection: stopping", with `err` and `origin`), its
 * stack written on stderr as Node would, and the process exits 1 once the log is written or
 * `waitMs` has passed: it never carries on in an unknown state. Errors during that wait go to
 * stderr only, while it takes them.
 * @example exitOnUncaught(logger, 2000);
 */
export function exitOnUncaught(logger: Logger, waitMs: number): void {
  let exiting = false;
  // A stderr whose reader is gone fails each write with EPIPE, as an 'error' event: unheard, an
  // uncaught exception of its own, whose report here wrote to stderr again, in a loop that kept
  // the process busy and alive for good. Heard, stderr is given up, and nothing else changes.
  process.stderr.on("error", () => (stderrGone = true));
  // One listener for both: with no 'unhandledRejection' listener, Node raises a rejection as an
  // uncaught exception whose origin says so (the default --unhandled-rejections=throw).
  process.on("uncaughtException", (err: unknown, origin: NodeJS.UncaughtExceptionOrigin) => {
    const what = origin === "unhandledRejection" ? "unhandled rejection" : "uncaught exception";
    toStderr(`ratekeeper: ${what}: ${err instanceof Error ? (err.stack ?? String(err)) : String(err)}\n`);
    if (exiting) return;
    exiting = true;
    logStopping(logger, () => logger.fatal({ err, origin }, `${what}: stopping`));
    void closeLog(logger, waitMs).finally(() => process.exit(1));
  });
}

let stderrGone = false;

/** Writes to stderr unless it has failed (its reader gone): never a write that fails again. */
function toStderr(text: string): void {
  if (stderrGone) return;
  try {
    process.stderr.write(text);
  } catch {
    // A synchronous failure (a closed descriptor): nothing to report it to.
    stderrGone = true;
  }
}
