/**
 * The service's stdout taken away (its reader died: `ratekeeper serve | tee log` with tee killed,
 * a log shipper gone): SIGTERM still stops it. pino's default destination writes asynchronously
 * and, at exit, flushes what is left synchronously; on a pipe with no reader that flush met EPIPE
 * and retried it every 100 ms for good (sonic-boom's flushSync retries every error), so the
 * service had stopped serving but never exited, until a second signal or SIGKILL.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, startServiceProcess } from "../support.js";

describe("a service whose stdout has no reader", () => {
  it("stops on SIGTERM, exit 0", async () => {
    const svc = await startServiceProcess(["--config", path.join(ROOT, "examples/rules.yaml")]);
    // Our end of its stdout closed: the pipe has no reader; its next log line meets EPIPE.
    svc.proc.stdout?.destroy();
    // stop(): SIGTERM, then SIGKILL after 10 s (a hung process: exit code null). No request is
    // in flight, so shutdown has nothing to wait for.
    expect(await svc.stop()).toBe(0);
  }, 60_000);
});
