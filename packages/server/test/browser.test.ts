/**
 * What a person sees, in headless Chromium: the live dashboard of a running service under
 * generated traffic (its domains, numbers that change, the top denied key, a check and its
 * explain, hostile keys shown as text), and the simulator's report opened from disk (its table
 * and its four charts, with no request leaving the machine). Screenshots go to .test-output/.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Browser, Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runSimulate } from "../src/cli/simulate.js";
import { SCREENSHOTS, findChromium, launchChromium } from "./browser-support.js";
import { ROOT, startServiceProcess, type ServiceProc } from "./support.js";

// The page functions below run in the browser; this file is type-checked without the DOM library.
declare const document: any;

const chromium = findChromium();
const TOKEN = "dashboard-test-token";
const HOSTILE_KEY = '<img src=x onerror="document.title=1">';

describe.skipIf(!chromium)("in headless Chromium", () => {
  let chrome: Awaited<ReturnType<typeof launchChromium>>;
  let browser: Browser;
  let svc: ServiceProc;
  let tmp: string;

  beforeAll(async () => {
    tmp = mkdtempSync(path.join(tmpdir(), "rk-browser-"));
    chrome = await launchChromium(chromium as string);
    browser = chrome.browser;
    svc = await startServiceProcess(["--config", path.join(ROOT, "examples/rules.yaml"), "--no-watch", "--admin-token", TOKEN]);
  });

  afterAll(async () => {
    await chrome?.close();
    await svc?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  /** Sends checks in the background (one abusive key among many polite ones) until stopped; bounded. */
  function traffic(): { stop(): Promise<void> } {
    let running = true;
    const done = (async () => {
      for (let i = 0; running && i < 200_000; i++) {
        const value = i % 3 === 0 ? "abuser" : i % 101 === 0 ? HOSTILE_KEY : `client-${i % 40}`;
        await fetch(`${svc.base}/v1/check`, {
          method: "POST",
          body: JSON.stringify({ domain: "api", descriptors: [[{ key: "api_key", value }]] }),
        });
        if (i % 25 === 0) await new Promise((r) => setTimeout(r, 10));
      }
    })();
    return {
      async stop() {
        running = false;
        await done;
      },
    };
  }

  async function dashboardPage(): Promise<Page> {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1000 });
    await page.authenticate({ username: "ops", password: TOKEN });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push((e as Error).message));
    await page.goto(`${svc.base}/dashboard/`, { waitUntil: "load" });
    (page as Page & { errors: string[] }).errors = errors;
    return page;
  }

  it("the dashboard shows the domains and rules, numbers that change each second, and the top denied key", async () => {
    const load = traffic();
    const page = await dashboardPage();
    try {
      await page.waitForSelector("#live.on", { timeout: 20_000 });
      const domains = await page.$$eval(".domain h3", (hs) => hs.map((h) => h.textContent));
      expect(domains).toEqual(expect.arrayContaining(["web", "envoy", "api"]));
      expect(await page.$eval('tr[data-rule="api/api_key"] td:nth-child(2)', (td) => td.textContent)).toBe(
        "fixed-window 10000 per 1d + leaky-bucket 5 per 1s",
      );
      // The total of decisions moves while traffic flows.
      const first = await page.$eval("#total", (e) => e.textContent);
      await page.waitForFunction((was) => document.querySelector("#total")?.textContent !== was, { timeout: 20_000 }, first);
      // Denials per second are shown for the rule that denies.
      await page.waitForFunction(
        () => Number(document.querySelector('tr[data-rule="api/api_key"] .denied-rate')?.textContent?.replace(/,/g, "")) > 0,
        {
          timeout: 20_000,
        },
      );
      await page.waitForFunction(() => document.querySelector("#top tbody tr td.key")?.textContent === "api_key=abuser", {
        timeout: 20_000,
      });
      expect(await page.$eval("#top tbody tr td:nth-child(3)", (td) => td.textContent)).toBe("api/api_key");
      expect(await page.$eval('#store dd[data-field="store"]', (dd) => dd.textContent)).toBe("memory");
      await page.screenshot({ path: path.join(SCREENSHOTS, "dashboard.png"), fullPage: true });
    } finally {
      await load.stop();
      await page.close();
    }
    expect((page as Page & { errors: string[] }).errors).toEqual([]);
  });

  it("shows a client-chosen key as text, never as markup", async () => {
    for (let i = 0; i < 30; i++)
      await fetch(`${svc.base}/v1/check`, {
        method: "POST",
        body: JSON.stringify({ domain: "api", descriptors: [[{ key: "api_key", value: HOSTILE_KEY }]] }),
      });
    const page = await dashboardPage();
    try {
      await page.waitForFunction(
        (k) => [...document.querySelectorAll("#top td.key")].some((td) => td.textContent === `api_key=${k}`),
        { timeout: 20_000 },
        HOSTILE_KEY,
      );
      expect(await page.$$eval("#top img, #domains img", (imgs) => imgs.length)).toBe(0);
      expect(await page.title()).toBe("ratekeeper dashboard");
    } finally {
      await page.close();
    }
  });

  it("try a check: the decision and its explain", async () => {
    const page = await dashboardPage();
    try {
      await page.waitForSelector("#live.on", { timeout: 20_000 });
      await page.select("#try-domain", "api");
      await page.type("#try-descriptor", "user_id=42");
      await page.click("#try-peek"); // a real check, charged
      await page.click("#try button[type=submit]");
      await page.waitForSelector("#try-result .verdict", { timeout: 10_000 });
      expect(await page.$eval("#try-result .verdict", (e) => e.textContent)).toBe("allowed");
      expect(await page.$eval("#try-result pre.explain", (e) => e.textContent)).toMatch(
        /^matched user_id: sliding-window 100 per 60000 ms; allowed cost 1, 99 left$/,
      );
    } finally {
      await page.close();
    }
  });

  it("the simulator report opens from disk: its table, its four charts, and no request off the machine", async () => {
    const out = path.join(tmp, "report");
    const code = await runSimulate({ scenario: "boundary", limit: "20", window: "10s", out }, { stdout: () => {}, stderr: () => {} });
    expect(code).toBe(0);
    const page = await browser.newPage();
    const requested: string[] = [];
    page.on("request", (r) => requested.push(r.url()));
    try {
      await page.setViewport({ width: 1100, height: 1400 });
      await page.goto(pathToFileURL(path.join(out, "index.html")).href, { waitUntil: "load" });
      const rows = await page.$$eval("tbody tr", (trs) =>
        trs.map((tr) => [tr.querySelector("th")?.textContent, tr.children[4]?.textContent]),
      );
      expect(rows).toContainEqual(["fixed-window", "2.00x"]);
      expect(rows).toContainEqual(["sliding-log", "1.00x"]);
      const images = await page.$$eval("figure img", (imgs) =>
        imgs.map((i) => ({ src: i.getAttribute("src"), ok: i.complete && i.naturalWidth > 300 })),
      );
      expect(images).toEqual(["admitted.svg", "worst-window.svg", "retry-after.svg", "state.svg"].map((src) => ({ src, ok: true })));
      expect(
        requested.every((u) => u.startsWith("file://")),
        requested.join(" "),
      ).toBe(true);
      await page.screenshot({ path: path.join(SCREENSHOTS, "simulator-report.png"), fullPage: true });
    } finally {
      await page.close();
    }
  });
});
