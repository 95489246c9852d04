import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.js";
import { errorIdField, HttpError, methodNotAllowed, sendError, TokenCheck } from "../http-io.js";
import { EventStreams } from "./events.js";
import { StateBuilder, type StateSources } from "./state.js";

export { MAX_EVENT_CLIENTS } from "./events.js";

/** Where the page's static files are: packages/server/dashboard/ (shipped with the package, no build step). */
export const DASHBOARD_ASSETS = new URL("../../dashboard/", import.meta.url);
const ASSETS: Readonly<Record<string, string>> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "style.css": "text/css; charset=utf-8",
};

/** The page runs only its own files: no inline script, nothing from another origin. */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/** Options of {@link createDashboard}. */
export interface DashboardOptions extends StateSources {
  /** When set, every dashboard request needs it: `Authorization: Bearer <token>`, or HTTP Basic with it as the password (browsers ask). */
  readonly adminToken?: string | undefined;
  readonly logger: Logger;
}

/** The dashboard's HTTP side: `handle` answers paths under `/dashboard`; `close` ends the event streams. */
export interface Dashboard {
  handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void>;
  close(): void;
}

/**
 * `/dashboard`: the page (static files read once at start), `GET /dashboard/api/state` (JSON,
 * for scripts and polling) and `GET /dashboard/api/events` (Server-Sent Events: a `state`
 * event with the same JSON about once a second). The state is built once per second however
 * many clients watch, and only while someone does.
 */
export function createDashboard(options: DashboardOptions): Dashboard {
  const files = new Map<string, Buffer>();
  for (const name of Object.keys(ASSETS)) files.set(name, readFileSync(new URL(name, DASHBOARD_ASSETS)));
  const builder = new StateBuilder(options);
  const token = options.adminToken ? new TokenCheck(options.adminToken) : undefined;
  const streams = new EventStreams(builder, options.stats, options.logger);

  async function route(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    // The admin token, as a bearer token or (browsers ask for a user and password) the Basic password.
    if (token && !token.matches(req.headers.authorization, true)) {
      throw new HttpError(
        "unauthorized",
        "dashboard: needs the admin token (Authorization: Bearer <token>, or Basic with the token as password)",
        undefined,
        { "www-authenticate": 'Basic realm="ratekeeper dashboard", charset="UTF-8"' },
      );
    }
    if (req.method !== "GET" && req.method !== "HEAD") throw methodNotAllowed("GET, HEAD");
    if (path === "/dashboard") {
      res.writeHead(308, { location: "/dashboard/" });
      res.end();
      return;
    }
    const name = path === "/dashboard/" ? "index.html" : path.slice("/dashboard/".length);
    const file = files.get(name);
    if (file !== undefined) {
      res.writeHead(200, { "content-type": ASSETS[name] as string, "cache-control": "no-cache", ...SECURITY_HEADERS });
      res.end(req.method === "HEAD" ? undefined : file);
      return;
    }
    if (name === "api/state") {
      const body = await builder.json();
      res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store", "x-content-type-options": "nosniff" });
      res.end(body);
      return;
    }
    if (name === "api/events") return streams.open(req, res);
    throw new HttpError("not_found", `no dashboard route ${path}`);
  }

  return {
    async handle(req, res, path) {
      try {
        await route(req, res, path);
      } catch (e) {
        if (!(e instanceof HttpError)) options.logger.error({ err: e, url: req.url, ...errorIdField(e) }, "dashboard request failed");
        sendError(req, res, e);
      }
    },
    close: () => streams.close(),
  };
}
