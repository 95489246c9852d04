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

/**
 * Bytes a stream may have waiting for its client (frames written, not yet taken by the socket):
 * past this the client has stopped reading, and the stream is closed rather than every later
 * frame buffered for it (a browser's EventSource reconnects on its own once it reads again).
 */
export const MAX_STREAM_BACKLOG = 1024 * 1024;

/** The open event streams, and the tick listener that feeds them. */
export class EventStreams {
  private readonly streams = new Set<ServerResponse>();
  /** Streams whose first state is being built: they hold a slot already. */
  private opening = 0;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly builder: StateBuilder,
    private readonly stats: Pick<DashboardStats, "onTick">,
    private readonly logger: Logger,
  ) {}

  /** Answers a request for the stream: opens it (until the client goes), or 503 when too many are open. */
  async open(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.streams.size + this.opening >= MAX_EVENT_CLIENTS) {
      sendJson(
        res,
        503,
        { error: "unavailable", message: `${MAX_EVENT_CLIENTS} dashboards are streaming already; poll /dashboard/api/state instead` },
        { "retry-after": "10" },
      );
      return;
    }
    // HEAD: the headers alone, at once (a stream's headers wait for its first event, which a
    // HEAD never writes: it would hang, holding a slot).
    if (req.method === "HEAD") {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store", "x-content-type-options": "nosniff" });
      res.end();
      return;
    }
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    // Watched from now: a client that leaves while its first state is built must not be added
    // after its 'close' has fired (it would hold a slot for good).
    let gone = false;
    res.once("close", () => {
      gone = true;
      this.drop(res);
    });
    this.opening++;
    let first: string;
    try {
      first = await this.builder.json();
    } finally {
      this.opening--;
    }
    if (gone) return;
    // The first state at once; then one per tick. `retry`: how long a browser waits before reconnecting.
    res.write(`retry: 2000\nevent: state\ndata: ${first}\n\n`);
    this.streams.add(res);
    this.unsubscribe ??= this.stats.onTick(() => this.broadcast());
    req.socket.setTimeout(0);
  }

  /** Forgets a closed stream; the ticks are left alone once none is open. */
  private drop(res: ServerResponse): void {
    this.streams.delete(res);
    if (this.streams.size === 0 && this.unsubscribe) {
      this.unsubscribe();
      this.unsubscribe = undefined;
    }
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
    this.builder.json().then(
      (state) => {
        const frame = `event: state\ndata: ${state}\n\n`;
        for (const res of this.streams) {
          // A client that stopped reading: closed (its 'close' drops it), not buffered for.
          if (res.writableLength > MAX_STREAM_BACKLOG) res.destroy();
          else res.write(frame);
        }
      },
      (e: unknown) => this.logger.warn({ err: (e as Error).message }, "dashboard: state failed"),
    );
  }
}
