/**
 * Counting the commands a Redis server ran (INFO commandstats: every command, those run inside
 * scripts too), for tests that bound the Redis work of a decision.
 */

/** Anything that can run INFO (an ioredis client, a Cluster node). */
export interface InfoClient {
  info(section: string): Promise<string>;
}

/** INFO commandstats as { command: calls }. */
export async function commandCalls(client: InfoClient): Promise<Record<string, number>> {
  const text = await client.info("commandstats");
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

/** The commands `fn` made the server run, by name (those that ran at least once); INFO itself left out. */
export async function commandDelta(client: InfoClient, fn: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = await commandCalls(client);
  await fn();
  const after = await commandCalls(client);
  const d: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) d[k] = v - (before[k] ?? 0);
  delete d.info;
  return d;
}
