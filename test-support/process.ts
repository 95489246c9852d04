/**
 * Shared test helpers for the outside processes a test starts (redis-server, nginx, the service):
 * a safety net that kills them when the test process exits, a bounded stop, a bounded wait for a
 * condition, line capture of their output, and free loopback ports.
 */
import type { ChildProcess } from "node:child_process";
import net from "node:net";

const HOST = "127.0.0.1";
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/**
 * Remembers `child` until it exits; whatever is still running when the test process exits is
 * killed with SIGKILL. A safety net only: tests stop their processes in afterAll.
 */
export function track<C extends ChildProcess>(child: C): C {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", () => {
      for (const c of live) {
        try {
          c.kill("SIGKILL");
        } catch {
          // already gone
        }
      }
    });
  }
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

/** Whether `child` has exited (by itself or by a signal). */
export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/**
 * Sends `signal` (SIGTERM unless told) and waits for the exit; SIGKILL if the process is still
 * there after `graceMs`. Resolves the exit code (null when a signal ended it).
 */
export function stopProcess(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM", graceMs = 10_000): Promise<number | null> {
  if (hasExited(child)) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const hard = setTimeout(() => child.kill("SIGKILL"), graceMs);
    child.once("exit", (code) => {
      clearTimeout(hard);
      resolve(code);
    });
    child.kill(signal);
  });
}

/**
 * Waits until `check` returns true, trying at most `maxTries` times, `stepMs` apart: a condition,
 * not a timing (a slow machine waits longer, never fails sooner). Resolves how long it took in
 * ms; rejects naming `what` after the last try. An error thrown by `check` ends the wait at once.
 */
export async function until(check: () => Promise<boolean> | boolean, what: string, maxTries = 200, stepMs = 50): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < maxTries; i++) {
    if (await check()) return performance.now() - start;
    await new Promise((r) => setTimeout(r, stepMs));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * Collects `child`'s stdout and stderr, line by line, into the returned array (which keeps
 * growing); `onLine` sees each line as it arrives.
 */
export function captureLines(child: ChildProcess, onLine?: (line: string) => void): string[] {
  const lines: string[] = [];
  let buf = "";
  const onData = (chunk: Buffer) => {
    buf += chunk.toString("utf8");
    let nl: number;
    while ((nl = buf.indexOf("\n")) !== -1) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      lines.push(line);
      onLine?.(line);
    }
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  return lines;
}

/**
 * Ports handed out by freePort() lie in [15000, 22768): below Linux's ephemeral range (32768-60999),
 * which the OS also gives to every outgoing connection. A port the OS picked with listen(0) could be
 * taken by some test's client socket between our check and the server's bind (seen in CI as
 * "redis-server exited (port in use?)"); a port below that range can only be taken by another
 * listener. A cluster node's bus port (port + 10000) stays below it too.
 */
const PORT_LOW = 15_000;
const PORT_SPAN = 7_768;
const handedOut = new Set<number>();

/** A free loopback TCP port, never handed out before by this process (a small race remains until the server binds: callers that spawn a server retry on a new port). */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = PORT_LOW + Math.floor(Math.random() * PORT_SPAN);
    if (handedOut.has(port)) continue;
    handedOut.add(port); // before the await: concurrent calls never hand out the same port
    if (await isPortFree(port)) return port;
  }
  throw new Error(`no free loopback port in [${PORT_LOW}, ${PORT_LOW + PORT_SPAN}) after 200 tries`);
}

/** Whether nothing listens on `port` (loopback) yet. */
export function isPortFree(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, HOST, () => srv.close(() => resolve(true)));
  });
}

/** Whether something accepts connections on `port` (loopback). */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, HOST);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}
