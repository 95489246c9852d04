/**
 * Where the service's log lines go: stdout, in a way that never stops the service. A log line is
 * worth less than a decision: when stdout cannot take more, lines are held up to a bound
 * ({@link HELD_BYTES}), later ones dropped and counted, and logging resumes by itself.
 */
import { closeSync, constants, fstatSync, openSync } from "node:fs";
import net from "node:net";
import { pino } from "pino";

/**
 * What is held while stdout takes nothing: sonic-boom's high-water mark (its write answers false
 * from there), and the same for a pipe. A line or so past it is held too.
 */
export const HELD_BYTES = 16 * 1024;

/**
 * Room past {@link HELD_BYTES} kept for the lines that say why the process stops ("shutting down",
 * "stopped", a start that failed) and the count of the lines dropped before them: a stdout that
 * was full when the process was told to stop still gets them once its reader reads within the
 * exit's wait. A line or so past it is held too; further lines are dropped as any other.
 */
export const RESERVED_BYTES = 8 * 1024;

/** What pino writes the lines to, and what the service asks of it at shutdown. */
export interface Destination {
  write(line: string): boolean;
  /**
   * Calls `log`, whose lines may be held past {@link HELD_BYTES}, up to {@link RESERVED_BYTES}
   * more, each after a count of the lines dropped before it (so the log stays in order).
   */
  reserved(log: () => void): void;
  /**
   * Resolves once what is held is written, or when no more can be (the destination gone), or
   * after `waitMs`, whichever comes first: never holds the exit longer.
   */
  drain(waitMs: number): Promise<void>;
  /**
   * Lets go of what it holds of stdout (a pipe's own descriptor and its handle): for a logger that
   * ends before the process does. Lines written after it are dropped. Never closes descriptors
   * 0-2 (libuv leaves them open), so the process's own stdout keeps working.
   */
  release(): void;
}

/**
 * Stdout: a pipe or a socket ({@link streamDestination}), else (a file, a terminal) written
 * synchronously ({@link syncDestination}). `onDropped(n)` is told, once stdout takes lines again,
 * how many were dropped meanwhile (the logger writes that as a line of its own).
 */
export function stdoutDestination(onDropped: (n: number) => void): Destination {
  let stream: net.Socket | undefined;
  let fd = 1;
  try {
    const st = fstatSync(1);
    if (st.isFIFO()) fd = ownPipe();
    if (st.isFIFO() || st.isSocket()) stream = new net.Socket({ fd, readable: false, writable: true });
  } catch {
    // fd 1 closed, or a kind of socket net cannot write to: written synchronously (and dropped on EBADF).
    if (fd !== 1) closeSync(fd);
  }
  return stream ? streamDestination(stream, onDropped) : syncDestination(onDropped);
}

/**
 * A descriptor of stdout's pipe that is this process's alone: /proc/self/fd/1 opened again (Linux),
 * a new open file description of the same pipe. libuv puts the descriptor it writes in
 * non-blocking mode, a flag of the open file description: on fd 1 itself, every other process
 * holding the pipe (a wrapper script, a sidecar that inherited it) would then meet EAGAIN on its
 * blocking writes while the service runs (a C program's fwrite fails, a Python print raises).
 * Where it cannot be opened again (no /proc; a pipe made by another user: EACCES; no reader:
 * ENXIO), fd 1, as Node does for `process.stdout`. A socket cannot be opened again: fd 1.
 */
function ownPipe(): number {
  try {
    return openSync("/proc/self/fd/1", constants.O_WRONLY | constants.O_NONBLOCK);
  } catch {
    return 1;
  }
}

/**
 * A pipe (a log shipper, `| tee`, a container runtime's) or a socket (journald's), written through
 * libuv's event loop: never a write that blocks the loop. Written synchronously, a pipe whose
 * reader stalls fills, and then each write blocks (a blocking pipe) or answers EAGAIN, which
 * sonic-boom's sync mode meets by sleeping 100 ms and trying again, in a loop: either way the
 * service answered nothing until the reader came back. Here the line goes to the kernel at once
 * when the pipe has room (libuv tries the write first), else it is held, up to
 * {@link HELD_BYTES}, and written as soon as the reader takes more; lines past that bound are
 * dropped and counted. libuv sets O_NONBLOCK on the descriptor: a pipe's own ({@link ownPipe}),
 * so that other processes writing to the same pipe keep their blocking writes; a socket's fd 1, a
 * flag they see too (as Node's `process.stdout` sets it). The socket is unref()'d: a held line
 * never keeps the process alive; shutdown waits for what is held through {@link Destination.drain}, for a bounded time.
 * Any error (EPIPE: no reader; EBADF: stdout closed) ends it, and lines are dropped from then on.
 * Not pino's own asynchronous destination (sonic-boom): at exit it flushes what is left
 * synchronously, and on a pipe whose reader is gone that flush retried EPIPE every 100 ms for
 * good (a SIGTERM stopped the service but never ended the process).
 */
function streamDestination(socket: net.Socket, onDropped: (n: number) => void): Destination {
  socket.unref();
  let gone = false;
  let dropped = 0;
  const reserve = new Reserve();
  // The count first, then the line that goes past the bound: `dropped` is 0 before the count is written.
  const countDropped = (): void => {
    const n = dropped;
    dropped = 0;
    if (n > 0) onDropped(n);
  };
  const waiting = new Set<() => void>();
  const settle = (): void => {
    for (const w of waiting) w();
    waiting.clear();
  };
  socket.on("error", () => {
    gone = true;
    settle();
  });
  const written = (err?: Error | null): void => {
    if (err || socket.writableLength > 0) return;
    if (dropped === 0) return settle();
    const n = dropped;
    dropped = 0;
    onDropped(n); // a line of its own, written (and waited for) as any other
  };
  return {
    write(line) {
      if (gone || socket.destroyed) return true;
      const held = socket.writableLength;
      if (held > HELD_BYTES && (!reserve.on || held > HELD_BYTES + RESERVED_BYTES)) dropped++;
      else {
        // Under the reserve, the count first even below the bound (a reader that took part of the hold).
        if (held > HELD_BYTES || reserve.on) countDropped();
        socket.write(line, written);
      }
      return true;
    },
    reserved: (log) => reserve.run(log),
    drain(waitMs) {
      if (gone || socket.destroyed || (socket.writableLength === 0 && dropped === 0)) return Promise.resolve();
      return bounded(waitMs, (done) => waiting.add(done));
    },
    release() {
      gone = true;
      socket.destroy();
      settle();
    },
  };
}

/**
 * A file (or a terminal), written synchronously: a file never answers EAGAIN, and a line written
 * at once is never lost at exit. A write that fails never stops the service: pino re-emits any
 * error of its destination but EPIPE, and with no listener that was an uncaught exception. Most
 * errors can clear: a full disk freed (ENOSPC), a quota raised. sonic-boom keeps a line it could
 * not write and tries it again, before the new one, at the next write, so logging resumes by
 * itself; while it cannot, it holds at most its high-water mark ({@link HELD_BYTES}) and one line
 * more, and further lines are dropped and counted. Two errors never clear, and lines are dropped
 * from then on: a pipe with no reader (EPIPE), and stdout closed (EBADF: fd 1 may be reused by a
 * file the process opens next, which must never receive log lines).
 */
function syncDestination(onDropped: (n: number) => void): Destination {
  const dest = pino.destination({ dest: 1, sync: true });
  let gone = false;
  // Whether sonic-boom holds lines it could not write, and whether they reached its high-water mark.
  let held = false;
  let full = false;
  let dropped = 0;
  // Whether lines may use the reserve now, and how much of it lines written while full have taken.
  const reserve = new Reserve();
  let reservedBytes = 0;
  const countDropped = (): void => {
    const n = dropped;
    dropped = 0;
    if (n > 0) onDropped(n);
  };
  dest.on("error", (e: NodeJS.ErrnoException) => {
    held = true;
    if (e.code === "EPIPE" || e.code === "EBADF") gone = true;
  });
  dest.on("write", () => (held = false));
  const write = (line: string): boolean => {
    if (gone) return true;
    // An empty write tries the held lines again: the new line goes only once they are written.
    if (full && (full = !dest.write(""))) {
      // An empty write is a retry of the held lines (drain's), not a line: nothing to drop or count.
      if (line === "") return true;
      if (!reserve.on || reservedBytes > RESERVED_BYTES) {
        dropped++;
        return true;
      }
      countDropped();
      reservedBytes += Buffer.byteLength(line);
    } else reservedBytes = 0;
    if (dropped > 0 && (!held || reserve.on)) countDropped();
    full = !dest.write(line);
    return true;
  };
  return {
    write,
    reserved: (log) => reserve.run(log),
    drain(waitMs) {
      if (gone || !held) return Promise.resolve();
      const untilMs = Date.now() + waitMs;
      return bounded(waitMs, (done) => {
        const retry = (): void => {
          write("");
          if (gone || !held) done();
          else if (Date.now() < untilMs) setTimeout(retry, 100).unref();
        };
        retry();
      });
    },
    release() {
      // Written to descriptor 1 itself, which stays the process's: nothing to close.
      gone = true;
    },
  };
}

/** Whether lines may use {@link RESERVED_BYTES} now: while {@link Reserve.run}'s `log` runs. */
class Reserve {
  on = false;

  run(log: () => void): void {
    const was = this.on;
    this.on = true;
    try {
      log();
    } finally {
      this.on = was;
    }
  }
}

/**
 * Resolves when `start` calls its `done`, or after `waitMs`. The timer keeps the process alive
 * until then (never longer): unref()'d, a process with nothing else left to run ended as soon as
 * the wait began, the lines unwritten, and one awaiting it at its top level with code 13.
 */
function bounded(waitMs: number, start: (done: () => void) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, waitMs);
    start(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
