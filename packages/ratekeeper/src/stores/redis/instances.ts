import { loadScript } from "./scripts.js";

/** How often a store renews its entry; an entry lives three heartbeats. */
const HEARTBEAT_MS = 5_000;

/** Sends one call of the registry script (through the store's lanes and breaker). */
export type RegistryCall = (script: ReturnType<typeof loadScript>, key: string, args: string[]) => Promise<unknown>;

/**
 * The count of live RedisStore instances sharing a prefix, kept in Redis (a sorted set of
 * instance ids scored by expiry, scripts/instances.lua) while Redis answers, so that the
 * `"degraded"` failure policy can limit each process at `limit / N` while it does not. The count
 * is the last one seen: a store that has never reached Redis counts 1. The heartbeat starts on
 * first use (no timer at construction) and its timer never keeps a process alive.
 */
export class InstanceRegistry {
  /** The live count last seen (at least 1: this instance). */
  count = 1;
  private readonly id = globalThis.crypto.randomUUID();
  private readonly script = loadScript("instances", []);
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly key: string,
    private readonly call: RegistryCall,
  ) {}

  /** Starts the heartbeat (idempotent). */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.beat(true), HEARTBEAT_MS);
    this.timer.unref?.();
    void this.beat(true);
  }

  /** Stops the heartbeat and removes this instance's entry (best effort). */
  async close(): Promise<void> {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.beat(false);
  }

  private async beat(live: boolean): Promise<void> {
    try {
      const n = Number(await this.call(this.script, this.key, [this.id, String(3 * HEARTBEAT_MS), live ? "1" : "0"]));
      if (Number.isSafeInteger(n) && n >= 1) this.count = n;
    } catch {
      // Redis is down: keep the last count (that is when it is needed). The store reports the failure.
    }
  }
}
