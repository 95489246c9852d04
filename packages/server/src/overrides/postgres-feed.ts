import pg from "pg";
import type { ChangeSignal } from "./types.js";

/** The NOTIFY channel every instance LISTENs on. */
export const NOTIFY_CHANNEL = "ratekeeper_overrides";
/** NOTIFY payloads must stay under 8000 bytes (https://www.postgresql.org/docs/current/sql-notify.html). */
const MAX_PAYLOAD_BYTES = 7900;

/** What the notification connection went through, for logs and metrics. */
export type ListenerEvent =
  | { readonly type: "connected"; readonly backendPid: number; readonly reconnects: number }
  | { readonly type: "lost"; readonly error: Error | undefined }
  | { readonly type: "connect-failed"; readonly error: Error; readonly retryInMs: number };

/** The options of {@link PostgresOverrideStore} that the notification connection reads. */
export interface ChangeFeedOptions {
  readonly connectionString: string;
  readonly keepaliveIntervalMs?: number;
  readonly keepaliveTimeoutMs?: number;
  readonly reconnectDelayMs?: readonly [number, number];
  readonly applicationName?: string;
  readonly onListenerEvent?: (event: ListenerEvent) => void;
}

/**
 * The PostgreSQL override store's change notifications: one LISTEN connection (outside the
 * pool) while anyone subscribes, watched ('error', 'end', and a keepalive query, since a
 * connection dropped without a FIN sends neither); when it is lost it is reconnected with
 * backoff, and on every (re)connect subscribers are told to resynchronise from their last
 * version, so a change whose NOTIFY went out while nobody listened is not missed.
 */
export class PostgresChangeFeed {
  private readonly listeners = new Set<(s: ChangeSignal) => void | Promise<void>>();
  private listenClient: pg.Client | undefined;
  private listenConnecting = false;
  private keepaliveTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private backoffMs: number;
  private closed = false;
  private reconnects = 0;
  private connectedOnce = false;
  /** Backend pid of the LISTEN connection while connected (for operations and tests). */
  listenBackendPid: number | undefined;

  constructor(private readonly options: ChangeFeedOptions) {
    this.backoffMs = options.reconnectDelayMs?.[0] ?? 100;
  }

  /** Adds a subscriber (connecting on the first); returns its unsubscribe (disconnecting after the last). */
  watch(listener: (signal: ChangeSignal) => void | Promise<void>): () => void {
    this.listeners.add(listener);
    if (!this.listenClient && !this.listenConnecting && !this.reconnectTimer) void this.connectListener();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stopListener();
    };
  }

  /** Whether the LISTEN connection is up (for readiness and metrics). */
  get listening(): boolean {
    return this.listenClient !== undefined;
  }

  /** Tells every subscriber; resolves when they have all handled it (their failures are swallowed). */
  emit(signal: ChangeSignal): Promise<void> {
    const pending: Promise<void>[] = [];
    for (const l of this.listeners) {
      try {
        const r = l(signal);
        if (r) pending.push(r.catch(() => undefined));
      } catch {
        // A subscriber's failure must not stop the others (nor fail a committed write).
      }
    }
    return pending.length === 0 ? Promise.resolve() : Promise.all(pending).then(() => undefined);
  }

  private async connectListener(): Promise<void> {
    if (this.closed || this.listeners.size === 0) return;
    this.listenConnecting = true;
    const client = new pg.Client({
      connectionString: this.options.connectionString,
      application_name: `${this.options.applicationName ?? "ratekeeper"}-listen`,
      keepAlive: true,
      // A connect that hangs (server unreachable without a refusal) must fail, or no retry follows.
      connectionTimeoutMillis: 10_000,
      query_timeout: this.options.keepaliveTimeoutMs ?? 3000,
    });
    let lost = false;
    const onLost = (error?: Error) => {
      if (lost) return;
      lost = true;
      this.listenerLost(client, error);
    };
    client.on("error", (e) => onLost(e));
    client.on("end", () => onLost(undefined));
    client.on("notification", (msg) => {
      if (msg.channel !== NOTIFY_CHANNEL) return;
      let version: number | undefined;
      try {
        const v = (JSON.parse(msg.payload ?? "{}") as { v?: unknown }).v;
        if (typeof v === "number") version = v;
      } catch {
        // A payload we did not write (someone ran NOTIFY by hand): still a reason to look.
      }
      void this.emit({ version });
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${NOTIFY_CHANNEL}`);
      const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      if (lost || this.closed) {
        await client.end().catch(() => undefined);
        return;
      }
      this.listenClient = client;
      this.listenBackendPid = rows[0]?.pid;
      this.backoffMs = this.options.reconnectDelayMs?.[0] ?? 100;
      if (this.connectedOnce) this.reconnects++;
      this.connectedOnce = true;
      this.options.onListenerEvent?.({ type: "connected", backendPid: this.listenBackendPid ?? 0, reconnects: this.reconnects });
      this.startKeepalive(client);
      // Whatever was written while nobody listened (before the first LISTEN, or during an
      // outage) sent its NOTIFY into the void: subscribers catch up from their last version.
      void this.emit({ resync: true });
    } catch (e) {
      lost = true;
      await client.end().catch(() => undefined);
      this.scheduleReconnect(e instanceof Error ? e : new Error(String(e)));
    } finally {
      this.listenConnecting = false;
    }
  }

  private startKeepalive(client: pg.Client): void {
    const intervalMs = this.options.keepaliveIntervalMs ?? 5000;
    const timeoutMs = this.options.keepaliveTimeoutMs ?? 3000;
    this.keepaliveTimer = setInterval(() => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`keepalive query took over ${timeoutMs} ms`)), timeoutMs);
      });
      Promise.race([client.query("SELECT 1"), timeout])
        .catch((e: unknown) => {
          if (this.listenClient === client) this.listenerLost(client, e instanceof Error ? e : new Error(String(e)));
        })
        .finally(() => clearTimeout(timer));
    }, intervalMs);
    this.keepaliveTimer.unref();
  }

  private listenerLost(client: pg.Client, error: Error | undefined): void {
    if (this.listenClient !== client) return;
    this.listenClient = undefined;
    this.listenBackendPid = undefined;
    if (this.keepaliveTimer) clearInterval(this.keepaliveTimer);
    this.keepaliveTimer = undefined;
    client.removeAllListeners("notification");
    client.on("error", () => undefined);
    void client.end().catch(() => undefined);
    this.options.onListenerEvent?.({ type: "lost", error });
    if (!this.closed && this.listeners.size > 0) this.scheduleReconnect(undefined);
  }

  private scheduleReconnect(error: Error | undefined): void {
    if (this.closed || this.reconnectTimer) return;
    const waitMs = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.options.reconnectDelayMs?.[1] ?? 5000);
    if (error) this.options.onListenerEvent?.({ type: "connect-failed", error, retryInMs: waitMs });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connectListener();
    }, waitMs);
    this.reconnectTimer.unref();
  }

  /** Drops the connection and its timers (subscribers stay; the next watch reconnects). */
  private stopListener(): void {
    if (this.keepaliveTimer) clearInterval(this.keepaliveTimer);
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.keepaliveTimer = undefined;
    this.reconnectTimer = undefined;
    const client = this.listenClient;
    this.listenClient = undefined;
    this.listenBackendPid = undefined;
    if (client) {
      client.removeAllListeners();
      client.on("error", () => undefined);
      void client.end().catch(() => undefined);
    }
  }

  /** Stops for good: no subscriber is told anything more. */
  close(): void {
    this.closed = true;
    this.listeners.clear();
    this.stopListener();
  }
}

/** A NOTIFY payload for change `p` (`{ v: version, ... }`), within PostgreSQL's size limit. */
export function payload(p: Record<string, unknown>): string {
  const full = JSON.stringify(p);
  if (Buffer.byteLength(full, "utf8") <= MAX_PAYLOAD_BYTES) return full;
  // The key is only informative (receivers read the change feed): drop it rather than fail.
  return JSON.stringify({ v: p.v });
}
