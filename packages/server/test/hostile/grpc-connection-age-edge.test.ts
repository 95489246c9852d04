/**
 * A gRPC connection age near the top of the accepted range (up to 2^31 - 1 ms, about 24.8 days):
 * grpc-js adds a jitter of up to +-10% to it, and a timer past 2^31 - 1 ms fires after 1 ms in
 * node (TimeoutOverflowWarning). An age from about 22.6 days up closed a connection (GOAWAY) as
 * soon as it was made, for any jitter above the part that fits: every connection of a client
 * turned over at once, where the operator asked for weeks. The jitter is made the largest here
 * (Math.random near 1) so that the test does not depend on chance.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../src/log.js";
import { startService, type RunningService } from "../../src/server.js";
import { PROTO_DIR } from "../support.js";

const RULES = path.resolve(import.meta.dirname, "../../../../examples/rules.yaml");
let svc: RunningService | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await svc?.close();
  svc = undefined;
});

describe("gRPC connection age at the top of its range", () => {
  for (const ageMs of [2_000_000_000, 2_147_483_646]) {
    it(`${ageMs} ms: a new connection stays open (no timer overflow)`, async () => {
      svc = await startService({
        configFile: RULES,
        port: 0,
        grpcPort: 0,
        host: "127.0.0.1",
        watch: false,
        dashboard: false,
        grpcMaxConnectionAgeMs: ageMs,
        logger: createLogger("silent"),
      });
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
      process.on("warning", onWarning);
      vi.spyOn(Math, "random").mockReturnValue(0.999);
      const def = protoLoader.loadSync("grpc/health/v1/health.proto", { includeDirs: [PROTO_DIR], keepCase: true, enums: String });
      const Health = (grpc.loadPackageDefinition(def) as any).grpc.health.v1.Health as grpc.ServiceClientConstructor;
      const c = new Health(`127.0.0.1:${svc.grpcPort}`, grpc.credentials.createInsecure()) as any;
      const check = () =>
        new Promise<any>((resolve, reject) => c.Check({ service: "" }, (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r))));
      try {
        expect((await check()).status).toBe("SERVING");
        vi.restoreAllMocks();
        // A second call on the same channel: it needed no new connection.
        expect((await check()).status).toBe("SERVING");
        // process 'warning' is emitted on a later tick than the timer's setTimeout.
        await new Promise((r) => setImmediate(r));
        expect(warnings.filter((w) => w.startsWith("TimeoutOverflowWarning"))).toEqual([]);
        expect(c.getChannel().getConnectivityState(false)).toBe(grpc.connectivityState.READY);
      } finally {
        process.off("warning", onWarning);
        c.close();
      }
    });
  }
});
