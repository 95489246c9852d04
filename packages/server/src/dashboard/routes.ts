import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.js";
import { HttpError, methodNotAllowed, sendError, sendJson, TokenCheck } from "../http-io.js";
import { StateBuilder, type StateSources } from "./state.js";

/** Where the page's static files are: packages/server/dashboard/ (shipped with the package, no build step). */
export const DASHBOARD_ASSETS = new URL("../../dashboard/", import.meta.url);
const ASSETS: Readonly<Record<string, string>> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "style.css": "text/css; charset=utf-8",
};

/** The most dashboards streaming at once; further ones are told to poll /dashboard/api/state. */
export const MAX_EVENT_CLIENTS = 16;

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
  const streams = new Set<ServerResponse>();
  let unsubscribe: (() => void) | undefined;

  const broadcast = () => {
    if (streams.size === 0) return;
    builder.build().then(
      (state) => {
        const frame = `event: state\ndata: ${JSON.stringify(state)}\n\n`;
        for (const res of streams) res.write(frame);
      },
      (e: unknown) => options.logger.warn({ err: (e as Error).message }, "dashboard: state failed"),
    );
  };

  async function handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    try {
      await route(req, res, path);
    } catch (e) {
      sendError(req, res, e);
    }
  }

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
      const body = JSON.stringify(await builder.build());
      res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(body);
      return;
    }
    if (name === "api/events") return events(req, res);
    throw new HttpError("not_found", `no dashboard route ${path}`);
  }

  async function events(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (streams.size >= MAX_EVENT_CLIENTS) {
      sendJson(
        res,
        503,
        { error: "unavailable", message: `${MAX_EVENT_CLIENTS} dashboards are streaming already; poll /dashboard/api/state instead` },
        { "retry-after": "10" },
      );
      return;
    }
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    // The first state at once; then one per tick. `retry`: how long a browser waits before reconnecting.
    res.write(`retry: 2000\nevent: state\ndata: ${JSON.stringify(await builder.build())}\n\n`);
    streams.add(res);
    unsubscribe ??= options.stats.onTick(broadcast);
    req.socket.setTimeout(0);
    res.once("close", () => {
      streams.delete(res);
      if (streams.size === 0 && unsubscribe) {
        unsubscribe();
        unsubscribe = undefined;
      }
    });
  }

  return {
    handle,
    close() {
      for (const res of streams) res.end();
      streams.clear();
      unsubscribe?.();
      unsubscribe = undefined;
    },
  };
}
