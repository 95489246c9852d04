/**
 * A real nginx with the shipped examples/nginx/nginx.conf in front of an app, asking the service
 * through auth_request, attacked by clients that send the headers the service trusts. Each client
 * uses its own loopback source address (127.0.0.x), so nginx's $remote_addr tells them apart.
 *
 * The rules have the shape of examples/rules.yaml (a limit per address, a tighter one on
 * /search* that costs 2), with windows of hours so nothing refills while the test runs: every
 * remaining count asserted below is exact, whatever the machine's speed.
 */
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INSTALL, findBinary } from "../../../../test-support/outside.js";
import { freePort } from "../../../../test-support/process.js";
import { adaptNginxConf, example, getJson, startNginx, startServiceProcess, type NginxProc, type ServiceProc } from "../support.js";
import { getFrom } from "./support.js";

const RULES = `
domains:
  - domain: web
    descriptors:
      - key: remote_address
        algorithm: token-bucket
        limit: 100
        window: 1d
        descriptors:
          - key: path
            value: /search*
            algorithm: gcra
            limit: 10
            window: 1h
            burst: 5
            cost: 2
policies:
  generous:
    algorithm: fixed-window
    limit: 1000000
    window: 1s
`;

const nginxBin = findBinary("nginx", "nginx", INSTALL.nginx);
let svc: ServiceProc;
let nginx: NginxProc;
let app: Server;
let dir: string;
const appPaths: string[] = [];

beforeAll(async () => {
  if (!nginxBin) return;
  dir = mkdtempSync(path.join(tmpdir(), "rk-hostile-nginx-"));
  writeFileSync(path.join(dir, "rules.yaml"), RULES);
  svc = await startServiceProcess(["--config", path.join(dir, "rules.yaml"), "--no-watch"]);
  app = createServer((req, res) => {
    appPaths.push(req.url ?? "");
    res.end("app\n");
  });
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  const appPort = (app.address() as AddressInfo).port;
  const port = await freePort();
  const conf = adaptNginxConf(example("examples/nginx/nginx.conf"), { 8000: port, 8080: svc.httpPort, 9000: appPort });
  nginx = await startNginx(conf, port, nginxBin);
});

afterAll(async () => {
  await nginx?.stop();
  await svc?.stop();
  if (app) await new Promise((r) => app.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * The units a descriptor key of domain web has left. A peek (which charges nothing) answers as
 * for a cost-1 request: `remaining` is what would be left after it, so one is added back.
 */
async function remaining(descriptorKey: string): Promise<number> {
  const j = await getJson(`${svc.base}/v1/keys/web/${encodeURIComponent(descriptorKey)}`);
  const s = j.statuses[0] as { allowed: boolean; remaining: number };
  return s.allowed ? s.remaining + 1 : s.remaining;
}

describe.skipIf(!nginxBin)("the shipped nginx.conf: the proxy decides what is charged, never the client", () => {
  it("a client-chosen X-RateLimit-Key and -Policy are ignored: the address is charged", async () => {
    const from = "127.0.0.21";
    for (let i = 0; i < 3; i++) {
      const r = await getFrom(from, nginx.port, "/page", {
        "X-RateLimit-Key": `random-${i}-${Math.random()}`,
        "X-RateLimit-Policy": "generous",
      });
      expect(r.status, nginx.errorLog()).toBe(200);
      expect(r.headers["ratelimit"]).toMatch(new RegExp(`^"100-per-1d";r=${99 - i};`));
    }
    expect(await remaining(`remote_address=${from}`)).toBe(97);
  });

  it("a client-sent X-RateLimit-Cost is ignored: one request costs one unit", async () => {
    const from = "127.0.0.22";
    const r = await getFrom(from, nginx.port, "/page", { "X-RateLimit-Cost": "100" });
    expect(r.status, nginx.errorLog()).toBe(200);
    expect(r.headers["ratelimit"]).toMatch(/^"100-per-1d";r=99;/);
    expect(await remaining(`remote_address=${from}`)).toBe(99);
  });

  it("client-sent descriptors cannot charge another address (X-RateLimit-Descriptor, -1 .. -9)", async () => {
    const attacker = "127.0.0.23";
    const victim = "127.0.0.24";
    const forged: Record<string, string> = { "X-RateLimit-Cost": "100", "X-RateLimit-Descriptor": `remote_address=${victim}` };
    for (let n = 1; n <= 9; n++) forged[`X-RateLimit-Descriptor-${n}`] = `remote_address=${victim}`;
    forged["X-RateLimit-Domain"] = "web";
    forged["X-RateLimit-Deny-Status"] = "401";
    const a = await getFrom(attacker, nginx.port, "/page", forged);
    expect(a.status, nginx.errorLog()).toBe(200);
    expect(await remaining(`remote_address=${victim}`)).toBe(100);
    const v = await getFrom(victim, nginx.port, "/page");
    expect(v.status).toBe(200);
    expect(v.headers["ratelimit"]).toMatch(/^"100-per-1d";r=99;/);
  });

  it("a path cannot add headers or descriptor entries to the subrequest (%0D%0A, %7C)", async () => {
    const attacker = "127.0.0.26";
    const victim = "127.0.0.27";
    const crlf = `/page%0D%0AX-RateLimit-Descriptor-2:%20remote_address=${victim}%0D%0AX-RateLimit-Cost:%20100`;
    const pipe = `/page%7Cremote_address=${victim}`;
    for (const p of [crlf, pipe]) {
      const a = await getFrom(attacker, nginx.port, p);
      expect(a.status, nginx.errorLog()).toBe(200);
    }
    expect(await remaining(`remote_address=${victim}`)).toBe(100);
    expect(await remaining(`remote_address=${attacker}`)).toBe(98);
  });

  it("the /search* rule applies, whatever the query string or spelling of the path", async () => {
    const from = "127.0.0.25";
    // gcra 10/h, burst 5: 6 units, each /search costs 2 -> three admitted, then a 429. One
    // bucket for all of them: the query string is not part of the path, and nginx's normalised
    // path is what is limited (%73 is "s", // and /x/.. collapse), as the app would route it.
    const spellings = ["/search?q=1", "/%73earch?q=2", "//search", "/x/../search?q=4"];
    const got = [];
    for (const p of spellings) {
      const r = await getFrom(from, nginx.port, p);
      got.push(`${r.status} ${String(r.headers["ratelimit"])}`);
    }
    expect(got, nginx.errorLog()).toEqual([
      expect.stringMatching(/^200 "10-per-1h";r=4;/),
      expect.stringMatching(/^200 "10-per-1h";r=2;/),
      expect.stringMatching(/^200 "10-per-1h";r=0;/),
      expect.stringMatching(/^429 "10-per-1h";r=0;/),
    ]);
    expect(await remaining(`remote_address=${from}|path=/search`)).toBe(0);
    // The address-wide descriptor was charged for all four: as in Envoy's ratelimit service,
    // each descriptor is charged on its own, and one's denial does not undo another's charge.
    expect(await remaining(`remote_address=${from}`)).toBe(96);
  });
});
