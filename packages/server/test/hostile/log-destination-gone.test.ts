/**
 * The service's stdout failing with anything but EPIPE: a closed terminal (SIGHUP, which the
 * service now survives and logs: the line meets EIO on the gone tty), stdout closed, a device
 * error. pino stops logging on EPIPE only and re-emits any other error on its destination, with
 * no listener: an uncaught exception that took the service down (seen: `ratekeeper serve` in a
 * pty whose master is closed died of "Error: EIO: i/o error, write" from the SIGHUP line). A
 * service that cannot log must keep deciding: the logger stops writing instead.
 * Played in a child process whose fd 1 is closed before it logs (EBADF, as EIO: not EPIPE).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

describe("the log destination failing with an error other than EPIPE", () => {
  it("the process lives on (the logger stops writing)", () => {
    const src = path.resolve(import.meta.dirname, "../../dist/log.js");
    const code = `import { closeSync } from "node:fs";
import { createLogger } from ${JSON.stringify(src)};
const log = createLogger("info");
closeSync(1);
log.info("the first line after stdout is gone");
log.info("and another");
setTimeout(() => { process.stderr.write("alive\\n"); process.exitCode = 0; }, 50);`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], { encoding: "utf8", timeout: 20_000 });
    expect(r.stderr, r.stderr).toBe("alive\n");
    expect(r.status).toBe(0);
  });

  it("stdout closed (EBADF): a file opened later on fd 1 never receives log lines", () => {
    // Lines resume after an error that can clear (log-destination-full.test.ts), never after this one.
    const src = path.resolve(import.meta.dirname, "../../dist/log.js");
    const file = path.join(mkdtempSync(path.join(tmpdir(), "rk-log-fd-")), "data");
    const code = `import { closeSync, openSync, readFileSync } from "node:fs";
import { createLogger } from ${JSON.stringify(src)};
const log = createLogger("info");
closeSync(1);
log.info("stdout is gone");
const fd = openSync(${JSON.stringify(file)}, "w+");
log.info("a line that must not land in the file on fd " + fd);
process.stderr.write(fd + " " + JSON.stringify(readFileSync(${JSON.stringify(file)}, "utf8")) + "\\n");`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], { encoding: "utf8", timeout: 20_000 });
    expect(r.stderr, r.stderr).toBe('1 ""\n');
    expect(r.status).toBe(0);
  });
});
