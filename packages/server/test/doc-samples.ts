/**
 * Every code sample of the documentation, checked against the packed and installed packages
 * (packed-support.ts), so that a doc cannot rot:
 * - ```ts and ```js blocks are typechecked as TypeScript modules (strict, `module: nodenext`,
 *   imports resolved from the installed tarballs): each must be complete, with its imports;
 * - a ```yaml block that is a rules file (has `domains:` or `policies:`) must pass the installed
 *   `ratekeeper config check`;
 * - a block marked `<!-- sample: run -->` is also run (node with tsx) and must exit 0.
 * Markers, in an HTML comment on the line before the fence (invisible on GitHub):
 *   `<!-- sample: continues -->`  the block continues the last unmarked ts/js block of the same
 *                                 file (which is prepended when checking it);
 *   `<!-- sample: run -->`        run it too (it must need no server);
 *   `<!-- sample: skip <why> -->` not checked (say why: e.g. an excerpt of a longer file).
 * Documents: README.md, packages/* /README.md, docs/**.md.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { TSC, type PackedProject } from "./packed-support.js";
import { ROOT } from "./support.js";

/** One fenced code block of a document. */
export interface Sample {
  /** `docs/middleware.md:38`: the fence's line. */
  where: string;
  lang: string;
  code: string;
  mark: "continues" | "run" | "skip" | undefined;
}

const CODE = new Set(["ts", "typescript", "js", "javascript", "mjs"]);

/** The documents whose samples are checked, relative to the repository root. */
export function documents(): string[] {
  const docs: string[] = ["README.md", "packages/ratekeeper/README.md", "packages/server/README.md"];
  const walk = (dir: string): void => {
    for (const e of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith(".md")) docs.push(rel);
    }
  };
  walk("docs");
  return docs;
}

/** The fenced blocks of `doc` (relative path), with their markers. */
export function extractSamples(doc: string): Sample[] {
  const lines = readFileSync(path.join(ROOT, doc), "utf8").split("\n");
  const out: Sample[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && !lines[end]!.startsWith("```")) end++;
    const marker = /^<!--\s*sample:\s*(continues|run|skip)\b.*-->\s*$/.exec(lines[i - 1] ?? "");
    out.push({
      where: `${doc}:${i + 1}`,
      lang: open[1]!,
      code: lines.slice(i + 1, end).join("\n"),
      mark: marker?.[1] as Sample["mark"],
    });
    i = end;
  }
  return out;
}

/** A file name for a sample: `docs/middleware.md:38` -> `docs_middleware_md_38`. */
const slug = (where: string) => where.replace(/[^A-Za-z0-9]+/g, "_");

/**
 * Checks every sample against `project`; throws one error listing every failure, each with the
 * document and line of its sample and what to do.
 */
export function checkSamples(project: PackedProject): void {
  const dir = path.join(project.dir, "samples");
  mkdirSync(dir, { recursive: true });
  const files = new Map<string, string>(); // sample file -> where
  const toRun: string[] = [];
  const rules: { file: string; where: string }[] = [];
  for (const doc of documents()) {
    let base = ""; // the last block of this document that is not a continuation
    for (const s of extractSamples(doc)) {
      if (s.mark === "skip") continue;
      if (CODE.has(s.lang)) {
        const code = s.mark === "continues" ? `${base}\n${s.code}` : s.code;
        if (s.mark !== "continues") base = s.code;
        const file = `${slug(s.where)}.ts`;
        // `export {}`: a module, so top-level await works and samples' names never clash.
        writeFileSync(path.join(dir, file), `${code}\nexport {};\n`);
        files.set(file, s.where);
        if (s.mark === "run") toRun.push(file);
      } else if (s.lang === "yaml" && /^(domains|policies):/m.test(s.code)) {
        const file = `${slug(s.where)}.yaml`;
        writeFileSync(path.join(dir, file), s.code);
        rules.push({ file, where: s.where });
      }
    }
  }
  const failures: string[] = [];
  const tsconfig = {
    compilerOptions: {
      module: "nodenext",
      moduleResolution: "nodenext",
      target: "es2022",
      strict: true,
      noEmit: true,
      types: ["node"],
      skipLibCheck: true,
    },
    include: ["*.ts"],
  };
  writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify(tsconfig));
  const tsc = spawnSync(process.execPath, [TSC, "-p", "tsconfig.json", "--pretty", "false"], { cwd: dir, encoding: "utf8" });
  for (const line of `${tsc.stdout}${tsc.stderr}`.split("\n")) {
    const m = /^([^(]+\.ts)\((\d+),\d+\): (.*)$/.exec(line);
    if (m) failures.push(`${files.get(m[1]!) ?? m[1]} (line ${m[2]} of the sample): ${m[3]}`);
    else if (line.trim()) failures.push(line);
  }
  const bin = path.join(project.dir, "node_modules", ".bin", "ratekeeper");
  for (const r of rules) {
    const c = spawnSync(bin, ["config", "check", r.file], { cwd: dir, encoding: "utf8" });
    if (c.status !== 0) failures.push(`${r.where}: ratekeeper config check: ${c.stdout}${c.stderr}`);
  }
  for (const file of toRun) {
    const run = spawnSync(process.execPath, ["--import", "tsx", file], { cwd: dir, encoding: "utf8", timeout: 120_000 });
    if (run.status !== 0) failures.push(`${files.get(file)}: running it exited ${String(run.status)}: ${run.stdout}${run.stderr}`);
  }
  if (failures.length > 0)
    throw new Error(
      `${failures.length} problem(s) in documentation samples (fix the sample: complete imports, real names; or mark it ` +
        "`<!-- sample: continues -->` / `<!-- sample: skip <why> -->` on the line before its fence; see packages/server/test/doc-samples.ts):\n" +
        failures.join("\n"),
    );
  if (files.size === 0) throw new Error("no documentation samples found: is the extraction broken?");
}

/**
 * The relative links of every document (`[text](docs/redis.md#use)`) whose file is not in the
 * repository, as `doc:line: target`.
 */
export function brokenLinks(): string[] {
  const broken: string[] = [];
  for (const doc of documents()) {
    const lines = readFileSync(path.join(ROOT, doc), "utf8").split("\n");
    lines.forEach((line, i) => {
      for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!.split("#")[0]!;
        if (target === "" || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        if (!existsSync(path.join(ROOT, path.dirname(doc), target))) broken.push(`${doc}:${i + 1}: ${m[1]}`);
      }
    });
  }
  return broken;
}
