/**
 * `GET /dashboard/api/events`: the dashboards watching through Server-Sent Events. Each gets a
 * `state` event at once, then one per stats tick; the state is built once per tick however many
 * watch, and the ticks are listened to only while someone does.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.js";
import { sendJson } from "../http-io.js";
import type { DashboardStats } from "./stats.js";
import type { StateBuilder } from "./state.js";

/** The most dashboards streaming at once; further ones are told to poll /dashboard/api/state. */
export const MAX_EVENT_CLIENTS = 16;

/** The open event streams, and the tick listener that feeds them. */
export class EventStreams {
  private readonly streams = new Set<ServerResponse>();
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly builder: StateBuilder,
    private readonly stats: Pick<DashboardStats, "onTick">,
    private readonly logger: Logger,
  ) {}

  /** Answers a request for the stream: opens it (until the client goes), or 503 when too many are open. */
  async open(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.streams.size >= MAX_EVENT_CLIENTS) {
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
    res.write(`retry: 2000\nevent: state\ndata: ${JSON.stringify(await this.builder.build())}\n\n`);
    this.streams.add(res);
    this.unsubscribe ??= this.stats.onTick(() => this.broadcast());
    req.socket.setTimeout(0);
    res.once("close", () => {
      this.streams.delete(res);
      if (this.streams.size === 0 && this.unsubscribe) {
        this.unsubscribe();
        this.unsubscribe = undefined;
      }
    });
  }

  /** Ends every stream and stops listening to the ticks. */
  close(): void {
    for (const res of this.streams) res.end();
    this.streams.clear();
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /** One tick: the state, built once, to every stream. */
  private broadcast(): void {
    if (this.streams.size === 0) return;
    this.builder.build().then(
      (state) => {
        const frame = `event: state\ndata: ${JSON.stringify(state)}\n\n`;
        for (const res of this.streams) res.write(frame);
      },
      (e: unknown) => this.logger.warn({ err: (e as Error).message }, "dashboard: state failed"),
    );
  }
}
