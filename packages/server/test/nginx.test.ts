/**
 * A real nginx in front of an app, asking the service through auth_request, with the config in
 * examples/nginx/nginx.conf and the rules in examples/rules.yaml (ports rewritten). Also the
 * descriptors examples/envoy/envoy.yaml makes Envoy send, over gRPC (Envoy is not installed).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INSTALL, findBinary } from "../../../test-support/outside.js";
import { freePort } from "../../../test-support/process.js";
import { ROOT, adaptNginxConf, example, rlsClient, startNginx, startServiceProcess, type NginxProc, type ServiceProc } from "./support.js";

const nginxBin = findBinary("nginx", "nginx", INSTALL.nginx);
let svc: ServiceProc;
let nginx: NginxProc;
let app: Server;
let appHits = 0;

beforeAll(async () => {
  svc = await startServiceProcess(["--config", path.join(ROOT, "examples/rules.yaml"), "--no-watch"]);
  // The Envoy cases below need only the service; the nginx ones skip (loudly) without nginx.
  if (!nginxBin) return;
  app = createServer((_req, res) => {
    appHits++;
    res.end("hello from the app\n");
  });
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  const appPort = (app.address() as AddressInfo).port;
  const port = await freePort();
  nginx = await startNginx(
    adaptNginxConf(example("examples/nginx/nginx.conf"), { 8000: port, 8080: svc.httpPort, 9000: appPort }),
    port,
    nginxBin,
  );
});

afterAll(async () => {
  await nginx?.stop();
  await svc?.stop();
  // Without nginx no app server was started: resolve at once rather than wait for a close that never comes.
  await new Promise<void>((r) => (app ? app.close(() => r()) : r()));
});

describe.skipIf(!nginxBin)("nginx auth_request -> ratekeeper", () => {
  it("passes allowed requests to the app with the limit headers", async () => {
    const r = await fetch(`http://127.0.0.1:${nginx.port}/hello`);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("hello from the app\n");
    expect(r.headers.get("ratelimit-policy")).toBe('"100-per-1m";q=100;w=60');
    expect(r.headers.get("ratelimit")).toMatch(/^"100-per-1m";r=99;t=\d+$/);
  });

  it("turns a denial into 429 with Retry-After, without reaching the app", async () => {
    // /search* is limited per address and path (gcra 10/s, burst 5, cost 2) and per address
    // (100/min): requests in a tight loop are denied by one of them well before 250.
    let denied: Response | undefined;
    let sent = 0;
    const before = appHits;
    while (!denied && sent < 250) {
      sent++;
      const r = await fetch(`http://127.0.0.1:${nginx.port}/search?q=${sent}`);
      if (r.status === 429) denied = r;
      else {
        expect(r.status).toBe(200);
        await r.text();
      }
    }
    expect(denied, `no 429 after ${sent} requests; nginx error log:\n${nginx.errorLog()}`).toBeDefined();
    expect(await denied!.json()).toEqual({ error: "rate limited" });
    expect(Number(denied!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(denied!.headers.get("ratelimit-policy")).toMatch(/;q=\d+;w=\d+/);
    expect(appHits - before).toBe(sent - 1);
    // The address-wide limit: keep going until it, too, denies a path without its own rule.
    let n = 0;
    let status = 200;
    while (status !== 429 && n < 250) {
      n++;
      const r = await fetch(`http://127.0.0.1:${nginx.port}/page`);
      status = r.status;
      await r.text();
    }
    expect(status).toBe(429);
  });
});

describe("examples/envoy/envoy.yaml's descriptors against examples/rules.yaml (gRPC, standing in for Envoy)", () => {
  it("each descriptor the Envoy config builds matches its rule; the shadow rule never denies", async () => {
    const conf = example("examples/envoy/envoy.yaml");
    expect(conf).toContain("domain: envoy");
    expect(conf).toContain("port_value: 8081");
    const rls = rlsClient(svc.grpcPort);
    try {
      const req = {
        domain: "envoy",
        descriptors: [
          { entries: [{ key: "generic_key", value: "default" }] },
          {
            entries: [
              { key: "destination_cluster", value: "app" },
              { key: "remote_address", value: "10.0.0.1" },
            ],
          },
          { entries: [{ key: "plan", value: "free" }] },
        ],
      };
      const r = await rls.shouldRateLimit(req);
      expect(r.overall_code).toBe("OK");
      // An envoy-format `rate_limit` block without a `name` reports an empty name, as
      // envoyproxy/ratelimit does; rules in our own format report their policy's name.
      expect(r.statuses.map((s: { current_limit: { name: string } }) => s.current_limit.name)).toEqual(["", "20-per-1s", "60-per-1m"]);
      // The shadow rule (plan=free, 60/min): past its limit it still answers OK.
      let last;
      for (let i = 0; i < 61; i++) last = await rls.shouldRateLimit({ domain: "envoy", descriptors: [req.descriptors[2]] });
      expect(last.overall_code).toBe("OK");
    } finally {
      rls.close();
    }
  });
});
