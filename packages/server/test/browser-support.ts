/**
 * Headless Chromium for the browser tests, through puppeteer-core (no browser download: it drives
 * Debian's `chromium` from PATH). Without chromium the tests skip with one loud line; under
 * CI=true they must run, so a missing chromium fails them.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import puppeteer, { type Browser } from "puppeteer-core";
import { INSTALL, findBinary } from "../../../test-support/outside.js";
import { ROOT } from "./support.js";

/** Where the browser tests save their screenshots (not committed). */
export const SCREENSHOTS = path.join(ROOT, ".test-output", "screenshots");

/** The chromium binary on PATH; undefined (after one loud line) when there is none; throws under CI=true. */
export function findChromium(): string | undefined {
  return findBinary(["chromium", "chromium-browser"], "browser (dashboard, simulator report)", INSTALL.chromium);
}

/** A headless Chromium with a fresh profile; `close()` stops it and removes the profile. */
export async function launchChromium(executablePath: string): Promise<{ browser: Browser; close(): Promise<void> }> {
  const profile = mkdtempSync(path.join(tmpdir(), "rk-chromium-"));
  const browser = await puppeteer.launch({
    executablePath,
    headless: true,
    userDataDir: profile,
    timeout: 60_000,
    protocolTimeout: 60_000,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      `--user-data-dir=${profile}`,
    ],
  });
  mkdirSync(SCREENSHOTS, { recursive: true });
  return {
    browser,
    async close() {
      await browser.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
