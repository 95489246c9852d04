/**
 * The `ratekeeper` command run in this process (its `main`), with what it writes to stdout and
 * stderr captured: for tests of its messages and exit codes that need no process of their own.
 */
import { vi } from "vitest";
import { main } from "../src/cli/main.js";

/** Runs `ratekeeper <argv>`: its exit code and what it wrote. */
export async function runMain(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const stdout = vi.spyOn(process.stdout, "write").mockImplementation((s) => (out.push(String(s)), true));
  const stderr = vi.spyOn(process.stderr, "write").mockImplementation((s) => (err.push(String(s)), true));
  try {
    return { code: await main(argv), stdout: out.join(""), stderr: err.join("") };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
  }
}
