/**
 * Temp folders and watchers for the rules-reload test files: what a test makes is removed (its
 * folders) and stopped (each function pushed on `stops`) after it. Call at the file's top level.
 * @example const { tempDir, stops } = scratch("reload-dir"); stops.push(watchRulesDir(tempDir(), opts));
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach } from "vitest";

export function scratch(label: string): { readonly tempDir: () => string; readonly stops: Array<() => void> } {
  const dirs: string[] = [];
  const stops: Array<() => void> = [];
  afterEach(() => {
    for (const s of stops.splice(0)) s();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return {
    tempDir: () => {
      const d = mkdtempSync(path.join(tmpdir(), `rk-${label}-`));
      dirs.push(d);
      return d;
    },
    stops,
  };
}
