/**
 * The reference model of a concurrency limit's leases (a plain list of id and expiry, expired
 * ones filtered out on every read) and random operations on it, for the property test of
 * core/leases.ts and the memory-vs-Redis differential test.
 */
import fc from "fast-check";
import type { LeaseOutcome } from "../src/core/leases.js";

/** The reference: every lease in a list, expired ones filtered out on every read. */
export class LeaseModel {
  leases: { id: string; exp: number }[] = [];

  private live(now: number) {
    this.leases = this.leases.filter((l) => l.exp > now);
    return this.leases;
  }

  acquire(now: number, id: string, limit: number, leaseMs: number): LeaseOutcome {
    const live = this.live(now);
    const mine = live.find((l) => l.id === id);
    if (mine || live.length < limit) {
      if (mine) mine.exp = now + leaseMs;
      else live.push({ id, exp: now + leaseMs });
      return { ok: true, remaining: Math.max(0, limit - live.length), retryAfterMs: 0, held: live.length };
    }
    return { ok: false, remaining: 0, retryAfterMs: Math.min(...live.map((l) => l.exp)) - now, held: live.length };
  }

  renew(now: number, id: string, leaseMs: number): boolean {
    const mine = this.live(now).find((l) => l.id === id);
    if (mine) mine.exp = now + leaseMs;
    return mine !== undefined;
  }

  release(now: number, id: string): boolean {
    const live = this.live(now);
    const i = live.findIndex((l) => l.id === id);
    if (i >= 0) live.splice(i, 1);
    return i >= 0;
  }

  count(now: number, limit: number): LeaseOutcome {
    const live = this.live(now);
    const full = live.length >= limit && live.length > 0;
    return {
      ok: false,
      remaining: Math.max(0, limit - live.length),
      retryAfterMs: full ? Math.min(...live.map((l) => l.exp)) - now : 0,
      held: live.length,
    };
  }
}

export type LeaseOp =
  | { kind: "acquire"; dt: number; id: number }
  | { kind: "renew"; dt: number; id: number }
  | { kind: "release"; dt: number; id: number }
  | { kind: "count"; dt: number };

/** Random operations on a few ids, at times that mostly move forward (sometimes back), over a few lease lengths. */
export function leaseOpsArb(leaseMs: number, length = 60): fc.Arbitrary<LeaseOp[]> {
  const dt = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: Math.ceil(leaseMs / 3) }) },
    { weight: 2, arbitrary: fc.constantFrom(leaseMs - 1, leaseMs, leaseMs + 1) },
    { weight: 1, arbitrary: fc.integer({ min: -leaseMs, max: -1 }) },
  );
  const id = fc.integer({ min: 0, max: 6 });
  return fc.array(
    fc.oneof(
      { weight: 5, arbitrary: fc.record({ kind: fc.constant("acquire" as const), dt, id }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant("renew" as const), dt, id }) },
      { weight: 4, arbitrary: fc.record({ kind: fc.constant("release" as const), dt, id }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant("count" as const), dt }) },
    ),
    { minLength: 1, maxLength: length },
  );
}
