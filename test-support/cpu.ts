/**
 * Saturates the machine's CPUs for the length of a test: one busy-loop process per core, as on a
 * loaded app server. Exactness and failure-handling tests run under it, because a limiter is
 * tested hardest when the machine is busy (late timers, event-loop lag, slow socket reads).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { availableParallelism } from "node:os";
import { stopProcess, track } from "./process.js";

/** Busy-loop processes, one per core (or `count`). */
export interface CpuLoad {
  readonly pids: readonly number[];
  stop(): Promise<void>;
}

/**
 * Starts one busy-loop process per core (at normal priority: they compete with the test's own
 * processes for every core). Stop it in afterAll; the processes are also killed if the test
 * process exits first.
 * @example const load = saturateCpu(); ...; await load.stop();
 */
export function saturateCpu(count = availableParallelism()): CpuLoad {
  const children: ChildProcess[] = [];
  for (let i = 0; i < count; i++) {
    children.push(track(spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" })));
  }
  return {
    pids: children.map((c) => c.pid ?? -1),
    async stop() {
      await Promise.all(children.map((c) => stopProcess(c, "SIGKILL", 5_000)));
    },
  };
}

/**
 * Runs `fn` with every core busy (see {@link saturateCpu}), stopping the load after it, for an
 * exactness check inside a longer test whose other steps should not run under load.
 * @example const admitted = await underLoad(() => burst("tenant", values, 30));
 */
export async function underLoad<T>(fn: () => Promise<T>): Promise<T> {
  const load = saturateCpu();
  try {
    return await fn();
  } finally {
    await load.stop();
  }
}
