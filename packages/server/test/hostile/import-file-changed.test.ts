/**
 * `overrides import FILE` reads the file twice: every line is validated, and only then written
 * in batches (so a million lines need not be held in memory). A file changed between the two
 * reads (still being generated, or edited) could hold a bad line the first read never saw: it
 * was skipped in silence and the import reported success with what it had written, against
 * "nothing is written unless every line is good". Now the write pass fails at such a line,
 * naming it and how many overrides the batches before it wrote (an import stopped mid-way, as
 * docs/overrides.md describes: re-running it is safe).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, expect, it } from "vitest";
import { importOverrides } from "../../src/overrides/jsonl.js";
import { openOverrideStore } from "../../src/overrides/open.js";
import { tempDir } from "../overrides-support.js";

const dir = tempDir("import-changed");
afterAll(() => dir.remove());

it("a line that turned bad after validation stops the import with an error naming it", async () => {
  const file = dir.file("overrides.jsonl");
  // Over 64 KiB, so the write pass has not read the end when the first batch is written.
  const line = (i: number) => JSON.stringify({ domain: "api", key: `user_id=${String(i).padStart(6, "0")}`, policy: "blocked" });
  const lines = Array.from({ length: 20_000 }, (_, i) => line(i));
  writeFileSync(file, `${lines.join("\n")}\n`);
  const store = await openOverrideStore(`sqlite:${dir.file("o.db")}`);
  try {
    let changed = false;
    const run = importOverrides(
      store,
      { path: file },
      {
        batchSize: 100,
        onProgress: () => {
          if (changed) return;
          changed = true;
          // Line 19,001 becomes bad: the same length, so every other line stays where it was.
          const text = readFileSync(file, "utf8").split("\n");
          const bad = text[19_000] as string;
          const head = `{"domain":"api","key":"user_id=019000","policy":"blockeX"`;
          text[19_000] = `${head}${" ".repeat(bad.length - head.length - 1)}}`;
          expect(text[19_000]?.length).toBe(bad.length);
          writeFileSync(file, text.join("\n"));
        },
      },
    );
    await expect(run).rejects.toThrow(/^line 19001: policy: .*the file changed since it was validated; \d+ overrides were written/s);
    expect(await store.get("api", "user_id=019000")).toBeUndefined();
    expect(await store.get("api", "user_id=019001")).toBeUndefined();
  } finally {
    await store.close();
  }
});
