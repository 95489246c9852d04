/**
 * The Redis store's calibrated clock: which calls read TIME, and which reading it keeps.
 * A manual monotonic clock; no Redis needed.
 */
import { describe, expect, it } from "vitest";
import { RESAMPLE_MS, ServerClock } from "../src/stores/redis/server-clock.js";

function manual() {
  const t = { now: 1_000 };
  return { t, clock: new ServerClock(() => t.now) };
}

describe("ServerClock", () => {
  it("asks every call to read TIME until the first reading is back, then sends Redis's time", () => {
    const { t, clock } = manual();
    expect(clock.now()).toBeUndefined();
    expect(clock.now()).toBeUndefined();
    const sent = clock.mark();
    t.now += 2; // 2 ms round trip; Redis read 1_700_000_000_000.000 ms at the middle
    clock.reading(sent, 1_700_000_000_000_000);
    expect(clock.now()).toBe(1_700_000_000_001); // 1 ms after the middle of the round trip
    t.now += 10.6;
    expect(clock.now()).toBe(1_700_000_000_011);
  });

  it("asks one call per RESAMPLE_MS for a new reading, and keeps the more precise one", () => {
    const { t, clock } = manual();
    clock.now();
    let sent = clock.mark();
    t.now += 0.2; // precise: +-0.1 ms
    clock.reading(sent, 5_000_000_000); // Redis at 5_000_000 ms at monotonic 1_000.1
    t.now += RESAMPLE_MS;
    expect(clock.now()).toBeUndefined(); // due: the next call that can read TIME does
    expect(clock.now()).toBeUndefined(); // (a fast-path call cannot: it stays due for the next one)
    clock.asking(); // a call that reads TIME is sent
    expect(clock.now()).toBe(Math.floor(t.now + 5_000_000 - 1_000.1)); // the others go on
    sent = clock.mark();
    t.now += 40; // a slow round trip (+-20 ms) that disagrees by 15 ms: not taken
    clock.reading(sent, (t.now - 20 + 15 + 5_000_000 - 1_000.1) * 1000);
    expect(clock.now()).toBe(Math.floor(t.now + 5_000_000 - 1_000.1));
    // A precise reading replaces it, also when it moves the offset.
    t.now += RESAMPLE_MS;
    expect(clock.now()).toBeUndefined();
    clock.asking();
    sent = clock.mark();
    t.now += 0.1;
    clock.reading(sent, (t.now - 0.05 + 3 + 5_000_000 - 1_000.1) * 1000);
    expect(clock.now()).toBe(Math.floor(t.now + 3 + 5_000_000 - 1_000.1));
  });

  it("a kept reading grows stale: after long enough a less precise one replaces it", () => {
    const { t, clock } = manual();
    clock.now();
    let sent = clock.mark();
    t.now += 0.2;
    clock.reading(sent, 5_000_000_000);
    t.now += 600_000; // ten minutes at the assumed drift: the kept reading is worth +-60 ms now
    expect(clock.now()).toBeUndefined();
    clock.asking();
    sent = clock.mark();
    t.now += 40;
    clock.reading(sent, (t.now - 20 + 7 + 5_000_000 - 1_000.1) * 1000);
    expect(clock.now()).toBe(Math.floor(t.now + 7 + 5_000_000 - 1_000.1));
  });
});
