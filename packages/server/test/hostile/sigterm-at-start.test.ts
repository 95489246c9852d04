/**
 * SIGTERM the moment the service says it is listening (an orchestrator stopping a pod that has
 * just started, a supervisor's restart): the service stops gracefully and exits 0. The
 * "listening" line is written synchronously, so a signal can arrive before the service has
 * returned to the command that waits for signals: the command listens for them from before the
 * service starts, or the default action kills it (no graceful stop, exit by signal).
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, startServiceProcess } from "../support.js";

describe("SIGTERM as the service starts", () => {
  it("right after the listening line: a graceful stop, exit 0, every time", async () => {
    const codes = [];
    for (let i = 0; i < 6; i++) {
      // startServiceProcess resolves on reading the listening line; the signal follows at once.
      const svc = await startServiceProcess(["--config", path.join(ROOT, "examples/rules.yaml")]);
      codes.push(await svc.stop());
    }
    expect(codes).toEqual([0, 0, 0, 0, 0, 0]);
  }, 120_000);
});
