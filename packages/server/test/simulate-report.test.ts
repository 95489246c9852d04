/**
 * The simulate command's report: a table per traffic, and with --out the index.html, one SVG per
 * chart and results.json; deterministic, self-contained (no network references), and every bad
 * flag or bad traffic line named.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { runSimulate } from "../src/cli/simulate.js";
import { CLI } from "./support.js";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = mkdtempSync(path.join(tmpdir(), "rk-sim-"));
  dirs.push(d);
  return d;
}

async function run(values: Record<string, string>) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runSimulate(values, { stdout: (s) => out.push(s), stderr: (s) => err.push(s) });
  return { code, stdout: out.join(""), stderr: err.join("") };
}

describe("simulate report", () => {
  it("writes index.html, four SVG charts and results.json; same files on a second run; nothing loaded from the network", async () => {
    const a = tmp();
    const b = tmp();
    const flags = { scenario: "boundary", limit: "20", window: "10s", out: a };
    const r = await run(flags);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^boundary: /);
    expect(r.stdout).toMatch(/fixed-window\s+\d+ \(100%\)\s+0\s+40 at/);
    expect(r.stderr).toMatch(/simulated \d+ requests x 6 algorithms in/);
    const files = readdirSync(a).sort();
    expect(files).toEqual(["admitted.svg", "index.html", "results.json", "retry-after.svg", "state.svg", "worst-window.svg"]);
    await run({ ...flags, out: b });
    // The same bytes, but for the output directory, which the report names in its command line.
    const read = (d: string, f: string) => readFileSync(path.join(d, f), "utf8").replaceAll(d, "DIR");
    for (const f of files) expect(read(b, f), f).toBe(read(a, f));

    const html = readFileSync(path.join(a, "index.html"), "utf8");
    for (const f of files.filter((x) => x.endsWith(".svg"))) expect(html).toContain(`src="${f}"`);
    // Self-contained: no script, stylesheet, image or font from elsewhere (SVG namespaces are names, not loads).
    for (const f of files) {
      const text = readFileSync(path.join(a, f), "utf8");
      expect(text, f).not.toMatch(/(src|href)="(https?:)?\/\//);
      expect(text, f).not.toMatch(/@import|url\((["']?)https?:/);
    }
    const svg = readFileSync(path.join(a, "worst-window.svg"), "utf8");
    expect(svg.startsWith("<svg")).toBe(true);
    for (const label of ["fixed-window", "sliding-log", "gcra", "2.00x"]) expect(svg).toContain(label);
    const results = JSON.parse(readFileSync(path.join(a, "results.json"), "utf8"));
    expect(results[0].algorithms.find((x: { label: string }) => x.label === "fixed-window").worstInWindow.units).toBe(40);
  });

  it("several scenarios in one report: file names prefixed with the scenario", async () => {
    const d = tmp();
    const r = await run({
      scenario: "steady,heavy-hitter",
      limit: "10",
      window: "1s",
      keys: "20",
      algorithms: "fixed-window,gcra:burst=9",
      out: d,
    });
    expect(r.code).toBe(0);
    expect(
      readdirSync(d)
        .filter((f) => f.endsWith(".svg"))
        .sort(),
    ).toEqual(
      ["steady", "heavy-hitter"].flatMap((s) => ["admitted", "retry-after", "state", "worst-window"].map((v) => `${s}-${v}.svg`)).sort(),
    );
    expect(r.stdout).toContain("gcra burst=9");
    expect(readFileSync(path.join(d, "index.html"), "utf8")).toContain('href="#heavy-hitter"');
  });

  it("reads a user's CSV traffic", async () => {
    const d = tmp();
    const csv = path.join(d, "mine.csv");
    writeFileSync(csv, "time,key\n" + Array.from({ length: 30 }, (_, i) => `${1_767_225_600_000 + i * 100},alice`).join("\n"));
    const r = await run({ traffic: csv, limit: "5", window: "1s", algorithms: "sliding-log" });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^mine\.csv: CSV\n30 requests, 1 key/);
    // One request every 100 ms, 5 per second allowed: the log admits exactly half.
    expect(r.stdout).toMatch(/sliding-log\s+15 \(50%\)\s+15\s+5 at/);
  });

  it("bad flags and bad traffic: exit 2 and a message naming the flag, or the line and field", async () => {
    const d = tmp();
    const bad = path.join(d, "bad.csv");
    writeFileSync(bad, "1767225600000,a\nsoon,b\n");
    const cases: [Record<string, string>, RegExp][] = [
      [{ limit: "ten" }, /--limit: must be a whole number \(got "ten"\)/],
      [{ window: "1 fortnight" }, /--window: must be a positive whole number of milliseconds/],
      [{ scenario: "tsunami" }, /--scenario: must be one or more of steady, bursty/],
      [
        { algorithms: "gcra:burst=-1,nope" },
        /algorithms\[0\]\.burst: must be a whole number >= 0[\s\S]*algorithms\[1\]\.algorithm: must be one of/,
      ],
      [{ algorithms: "gcra:burst" }, /--algorithms: "burst" in item 1 \("gcra:burst"\) is not option=value/],
      [{ traffic: bad }, /bad\.csv:2: time: not a time \(got "soon"/],
      [{ traffic: path.join(d, "missing.csv") }, /--traffic: cannot read .*missing\.csv/],
      [{ traffic: bad, scenario: "steady" }, /--traffic: give --traffic or --scenario, not both/],
      [{ scenario: "steady", key: "nobody" }, /stateKey: is not a key of the traffic/],
    ];
    for (const [flags, message] of cases) {
      const r = await run(flags);
      expect(r.code, JSON.stringify(flags)).toBe(2);
      expect(r.stderr, JSON.stringify(flags)).toMatch(message);
      expect(r.stderr.startsWith("ratekeeper simulate: "), r.stderr).toBe(true);
    }
  });

  it("is the ratekeeper command's simulate subcommand", () => {
    const out = execFileSync(process.execPath, [CLI, "simulate", "--scenario", "boundary", "--limit", "5", "--window", "10s"], {
      encoding: "utf8",
    });
    expect(out).toMatch(/^boundary: /);
    expect(out).toMatch(/fixed-window\s+\d+ \(100%\)\s+0\s+10 at/);
    expect(execFileSync(process.execPath, [CLI, "--help"], { encoding: "utf8" })).toMatch(
      /\n {2}simulate\s+replay traffic through every algorithm/,
    );
  });
});
