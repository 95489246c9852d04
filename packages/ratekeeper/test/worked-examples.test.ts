/**
 * The worked examples of published articles on rate limiting, with the articles' own numbers, run
 * through the public API with a manual clock. Each expectation cites the line of the article it
 * checks. The articles: "Rate Limiting" (a blog post of 18 April 2018), "Rate Limiting Algorithm"
 * (an overview of the classic algorithms), Vikas Kumar's "Rate Limiting Techniques", ClassDojo's
 * sliding window counter post, and Arpit Bhayani's "Designing and implementing a Sliding Window
 * based Rate Limiter".
 */
import { describe, expect, it } from "vitest";
import { MemoryStore, RateLimiter, type Decision, type LimitSpec } from "../src/index.js";

/** A manual clock: tests move it, nothing sleeps. */
function manualClock(startMs: number) {
  let now = startMs;
  return {
    now: () => now,
    set: (ms: number) => void (now = ms),
    advance: (ms: number) => void (now += ms),
  };
}

function limiterFor(spec: LimitSpec, clock: { now: () => number }): RateLimiter {
  return new RateLimiter({ ...spec, clock: clock.now, store: new MemoryStore({ sweepIntervalMs: 0 }) });
}

// "Rate Limiting" (Wednesday 18 April 2018): the same seven requests under each algorithm.
// Noon on that day, aligned to the minute (and so to 15 s sub-windows).
const NOON = Date.UTC(2018, 3, 18, 12, 0, 0);
const hms = (h: number, m: number, s: number) => NOON + ((h - 12) * 3600 + m * 60 + s) * 1000;
const POST_2018_TIMES: Array<[string, number]> = [
  ["12:00:05", hms(12, 0, 5)],
  ["12:00:15", hms(12, 0, 15)],
  ["12:01:01", hms(12, 1, 1)],
  ["12:01:10", hms(12, 1, 10)],
  ["12:01:40", hms(12, 1, 40)],
  ["12:01:50", hms(12, 1, 50)],
  ["12:02:20", hms(12, 2, 20)],
];

async function timeline(spec: LimitSpec, times = POST_2018_TIMES): Promise<Array<[string, Decision]>> {
  const clock = manualClock(NOON);
  const limiter = limiterFor(spec, clock);
  const out: Array<[string, Decision]> = [];
  for (const [label, t] of times) {
    clock.set(t);
    out.push([label, await limiter.consume("user1")]);
  }
  return out;
}

const allowedOf = (rows: Array<[string, Decision]>) => rows.map(([label, d]) => `${label} ${d.allowed ? "allowed" : "rejected"}`);

describe('"Rate Limiting" (2018): seven requests, 3 per 60 s', () => {
  const expected = [
    "12:00:05 allowed",
    "12:00:15 allowed",
    "12:01:01 allowed",
    "12:01:10 allowed",
    "12:01:40 allowed",
    "12:01:50 rejected",
    "12:02:20 allowed",
  ];

  it("fixed window: counter 0->1, 1->2; reset at 12:01:00 to 1, 2, 3; 4 rejected; reset at 12:02:00", async () => {
    const rows = await timeline({ algorithm: "fixed-window", limit: 3, window: "60s" });
    expect(allowedOf(rows)).toEqual(expected);
    // "user1_1515120100: 2 -> 3" at 12:01:40: nothing left in that window.
    expect(rows[4]?.[1].remaining).toBe(0);
    // Rejected at 12:01:50: the counter resets at 12:02:00, 10 s later.
    expect(rows[5]?.[1].retryAfterMs).toBe(10_000);
    // "12:02:20 ... Allowed as counter reset": first of the new window, 2 left.
    expect(rows[6]?.[1].remaining).toBe(2);
  });

  it("sliding log: 12:01:10 passes because 12:00:05 is more than 60 s old; 12:01:50 has 4 in the last 60 s", async () => {
    const rows = await timeline({ algorithm: "sliding-log", limit: 3, window: "60s" });
    expect(allowedOf(rows)).toEqual(expected);
    // At 12:01:50 the log holds 12:01:01, 12:01:10, 12:01:40: room comes when 12:01:01 leaves, at 12:02:01.
    expect(rows[5]?.[1].retryAfterMs).toBe(11_000);
    // The post logs the rejected 12:01:50 too and still admits 12:02:20 with 3 in the set. We do not
    // log rejected requests (the contract: "rejected requests are not logged"), so at 12:02:20 the
    // log is {12:01:40, 12:02:20}: 1 left.
    expect(rows[6]?.[1].remaining).toBe(1);
  });

  it("sliding window, 15 s buckets, unweighted: the sum of the current and 3 previous sub-windows", async () => {
    const rows = await timeline({ algorithm: "sliding-window", limit: 3, window: "60s", buckets: 4, weighted: false });
    expect(allowedOf(rows)).toEqual(expected);
    // 12:01:01: {12:00:15: 1, 12:01:00: 1} (12:00:00 expired) -> 1 left.
    expect(rows[2]?.[1].remaining).toBe(1);
    // 12:01:40: {12:01:00: 2, 12:01:30: 1} (12:00:15 expired) -> 0 left.
    expect(rows[4]?.[1].remaining).toBe(0);
    // 12:01:50 is rejected with 4 in the last four sub-windows; the 12:01:00 sub-window (2 units)
    // leaves the count at 12:02:00, so the retry is 10 s away.
    expect(rows[5]?.[1].retryAfterMs).toBe(10_000);
    // 12:02:20: {12:01:30: 1, 12:02:15: 1} -> 1 left (the post also counts the rejected 12:01:45
    // sub-window request; we never count rejected requests, so we hold one less).
    expect(rows[6]?.[1].remaining).toBe(1);
  });

  it("sliding tail (buckets: 1, weighted, rounded down): weighted counts 2.9, 3.6, 3.6, 4.3 -> rejected, 3.6", async () => {
    const rows = await timeline({ algorithm: "sliding-window", limit: 3, window: "60s", buckets: 1 });
    expect(allowedOf(rows)).toEqual(expected);
    // Remaining = limit - floor(weighted count including this request):
    // 12:01:01: 2 * 59/60 + 1 = 2.97 ("2.9") -> floor 2 -> 1 left.
    expect(rows[2]?.[1].remaining).toBe(3 - 2);
    // 12:01:10: 2 * 50/60 + 2 = 3.67 ("3.6") -> floor 3 -> allowed, 0 left.
    expect(rows[3]?.[1].remaining).toBe(0);
    // 12:01:40: 2 * 20/60 + 3 = 3.67 ("3.6") -> floor 3 -> allowed, 0 left.
    expect(rows[4]?.[1].remaining).toBe(0);
    // 12:01:50: 2 * 10/60 + 4 = 4.33 ("4.3") -> floor 4 > 3 -> rejected.
    expect(rows[5]?.[1].allowed).toBe(false);
    // 12:02:20: the post's previous window holds 4 (it counted the rejected request): 4 * 40/60 + 1 = 3.67
    // ("3.6") -> allowed. We do not count rejections, so our previous window holds 3:
    // floor(3 * 40/60) + 1 = 3 -> allowed, 0 left. Same decision.
    expect(rows[6]?.[1].remaining).toBe(0);
    // The post: "if the user sent any more requests before 12:02:31, they would be rejected" (with its
    // count of 4). With our count of 3 the next one passes once floor(3 * (60 - s)/60) <= 1, i.e. as
    // soon as s > 20: at 12:02:20.001, so retryAfterMs says 1 ms (time is integer milliseconds).
    const clock = manualClock(NOON);
    const limiter = limiterFor({ algorithm: "sliding-window", limit: 3, window: "60s", buckets: 1 }, clock);
    for (const [, t] of POST_2018_TIMES) {
      clock.set(t);
      await limiter.consume("user1");
    }
    const next = await limiter.peek("user1");
    expect(next.allowed).toBe(false);
    expect(next.retryAfterMs).toBe(1);
    clock.advance(1);
    expect((await limiter.consume("user1")).allowed).toBe(true);
  });

  it("leaky bucket, size 3, leaking 1 per 20 s: every request fits", async () => {
    // The post leaks in whole steps (it decrements "by up to 3" at 12:01:01, by 2 at 12:01:40 and
    // 12:02:20) and its bucket never holds more than 2. Ours leaks continuously (1/20 of a unit per
    // second, in integers: see bucket.ts), so the level differs between steps (e.g. 1.5 instead of 2
    // at 12:00:15, 1.55 instead of 2 at 12:01:10) but never exceeds the post's, and the decisions
    // are the same: all seven admitted.
    const rows = await timeline({ algorithm: "leaky-bucket", limit: 1, window: "20s", capacity: 3 });
    expect(rows.every(([, d]) => d.allowed)).toBe(true);
    // 12:00:15: level 1 - 10/20 + 1 = 1.5 -> 1 whole unit of room left (post: tokens 2, 1 left).
    expect(rows[1]?.[1].remaining).toBe(1);
    // 12:01:01: the 1.5 has drained (46 s x 1/20 s = 2.3): level 1, 2 left (post: tokens 1).
    expect(rows[2]?.[1].remaining).toBe(2);
    // 12:01:50: 1.55 - 1.5 + 1 = 1.05 at 12:01:40, then 1.05 - 0.5 + 1 = 1.55: 1 left (post: tokens 2).
    expect(rows[5]?.[1].remaining).toBe(1);
  });

  it("fixed window's double burst at the boundary (3 at 12:00:59 and 3 at 12:01:00; 5 at 11:00:59 and 5 at 11:01:00)", async () => {
    // "Rate Limiting" (2018): "if the user made 3 requests at 12:00:59 and a further 3 requests at 12:01:00, this
    // would allow the user to make 6 requests in a 2 second period".
    const clock = manualClock(hms(12, 0, 59));
    const fixed = limiterFor({ algorithm: "fixed-window", limit: 3, window: "60s" }, clock);
    const log = limiterFor({ algorithm: "sliding-log", limit: 3, window: "60s" }, clock);
    const admitted = { fixed: 0, log: 0 };
    for (const t of [hms(12, 0, 59), hms(12, 1, 0)]) {
      clock.set(t);
      for (let i = 0; i < 3; i++) {
        if ((await fixed.consume("u")).allowed) admitted.fixed++;
        if ((await log.consume("u")).allowed) admitted.log++;
      }
    }
    expect(admitted).toEqual({ fixed: 6, log: 3 });

    // "Rate Limiting Algorithm": 5 per minute, 5 requests at 11:00:59 and 5 more at 11:01:00: 10 in one second.
    const c2 = manualClock(Date.UTC(2018, 3, 18, 11, 0, 59));
    const five = limiterFor({ algorithm: "fixed-window", limit: 5, window: "1m" }, c2);
    let n = 0;
    for (let i = 0; i < 6; i++) if ((await five.consume("u")).allowed) n++;
    expect(n).toBe(5);
    c2.advance(1_000);
    for (let i = 0; i < 6; i++) if ((await five.consume("u")).allowed) n++;
    expect(n).toBe(10);
  });
});

describe("Vikas Kumar, Rate Limiting Techniques", () => {
  it("fixed window, 3 requests/minute: requests 1-3 in window 1 pass; of 4-8 in window 2, 3 pass and 2 are blocked", async () => {
    // "if current time is 21/04/2020 10:00:23, then current window start time is 21/04/2020 10:00:00"
    const w1 = Date.UTC(2020, 3, 21, 10, 0, 0);
    const clock = manualClock(w1);
    const limiter = limiterFor({ algorithm: "fixed-window", limit: 3, window: "1m" }, clock);
    const results: boolean[] = [];
    for (const s of [10, 23, 40]) {
      clock.set(w1 + s * 1000);
      results.push((await limiter.consume("12345")).allowed);
    }
    for (const s of [65, 70, 80, 95, 110]) {
      clock.set(w1 + s * 1000);
      results.push((await limiter.consume("12345")).allowed);
    }
    expect(results).toEqual([true, true, true, true, true, true, false, false]);
  });

  it("token bucket, rate 100 tokens per minute, capacity 500: a burst of 500, then 100 per minute", async () => {
    const clock = manualClock(0);
    const limiter = limiterFor({ algorithm: "token-bucket", limit: 100, window: "1m", capacity: 500 }, clock);
    let admitted = 0;
    for (let i = 0; i < 600; i++) if ((await limiter.consume("u")).allowed) admitted++;
    expect(admitted).toBe(500); // "up to a certain maximum (say 500) to allow for bursts"
    const denied = await limiter.peek("u");
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBe(600); // one token per 60_000 / 100 = 600 ms
    clock.advance(60_000); // "NUM_TOKENS_TO_ADD = rate * delta": 100 tokens after a minute
    admitted = 0;
    for (let i = 0; i < 150; i++) if ((await limiter.consume("u")).allowed) admitted++;
    expect(admitted).toBe(100);
    // "If NEW_TOKEN_COUNT > capacity, set NEW_TOKEN_COUNT = capacity": after an hour idle, still 500.
    clock.advance(3_600_000);
    expect((await limiter.peek("u")).remaining).toBe(499);
  });

  it("GCRA, 100 req/s with burst 5: 6 admitted at once, the 7th waits 10 ms (the emission interval)", async () => {
    // Rate Limiting Techniques: emission_interval = 1000/100 = 10 ms; delay_tolerance = 5 x 10 = 50 ms.
    const arrival1 = Date.UTC(2020, 3, 21, 10, 0, 0, 500); // "10:00:00.500"
    const clock = manualClock(arrival1);
    const limiter = limiterFor({ algorithm: "gcra", limit: 100, window: "1s", burst: 5 }, clock);
    const first6 = [];
    for (let i = 0; i < 6; i++) first6.push((await limiter.consume("u")).allowed);
    expect(first6).toEqual([true, true, true, true, true, true]); // "5 additional requests than usual 1"
    const seventh = await limiter.consume("u");
    expect(seventh.allowed).toBe(false);
    expect(seventh.retryAfterMs).toBe(10);
    clock.advance(9);
    expect((await limiter.consume("u")).allowed).toBe(false);
    clock.advance(1);
    expect((await limiter.consume("u")).allowed).toBe(true);
    // "If the client doesn't make any requests in future interval ... it accumulates burst balance":
    // 20 ms idle buys back 2 requests.
    clock.advance(20);
    expect((await limiter.consume("u")).allowed).toBe(true);
    expect((await limiter.consume("u")).allowed).toBe(true);
    expect((await limiter.consume("u")).allowed).toBe(false);
  });

  it("GCRA without burst: requests must be spaced 10 ms apart ('Any request made within 10 ms of previous request will be rejected')", async () => {
    const clock = manualClock(Date.UTC(2020, 3, 21, 10, 0, 0, 500));
    const limiter = limiterFor({ algorithm: "gcra", limit: 100, window: "1s" }, clock);
    expect((await limiter.consume("u")).allowed).toBe(true);
    // "if a client sends 10 requests at the same time, only 1 will be allowed and 9 will be rejected"
    let sameTime = 0;
    for (let i = 0; i < 9; i++) if ((await limiter.consume("u")).allowed) sameTime++;
    expect(sameTime).toBe(0);
    clock.advance(9);
    expect((await limiter.consume("u")).allowed).toBe(false);
    clock.advance(1); // "ARRIVAL2 >= TAT: allow"
    expect((await limiter.consume("u")).allowed).toBe(true);
    for (let i = 0; i < 20; i++) {
      clock.advance(10);
      expect((await limiter.consume("u")).allowed).toBe(true);
    }
  });
});

describe("ClassDojo, the weighted sliding window: 100 per minute", () => {
  const MIN = 60_000;

  async function afterBurst(burstAtMs: number, askAtMs: number, buckets: number): Promise<number> {
    const clock = manualClock(burstAtMs);
    const limiter = limiterFor({ algorithm: "sliding-window", limit: 100, window: "1m", buckets }, clock);
    for (let i = 0; i < 100; i++) {
      // The 100 requests spread over the first 0.25 min (or all at 0.99 min).
      clock.set(burstAtMs + (burstAtMs === 0 ? Math.floor((i * 0.25 * MIN) / 100) : 0));
      expect((await limiter.consume("1.2.3.4:/api/widgets")).allowed).toBe(true);
    }
    clock.set(askAtMs);
    let n = 0;
    while ((await limiter.consume("1.2.3.4:/api/widgets")).allowed) n++;
    return n;
  }

  it("100 requests in the first 0.25 min: 25 allowed at 1.25 min ('1 + 0.75*100 = 76, 24 more plus the current one')", async () => {
    expect(await afterBurst(0, 1.25 * MIN, 1)).toBe(25);
  });

  it("... and 75 at 1.75 min ('1 + 0.25*100 ... 74 plus the 1 current')", async () => {
    expect(await afterBurst(0, 1.75 * MIN, 1)).toBe(75);
  });

  it("with 30 s sub-windows: 50 allowed at 1.25 min", async () => {
    expect(await afterBurst(0, 1.25 * MIN, 2)).toBe(50);
  });

  it("100 requests at 0.99 min: still 25 at 1.25 min with one counter, but all blocked with 30 s sub-windows", async () => {
    expect(await afterBurst(0.99 * MIN, 1.25 * MIN, 1)).toBe(25);
    expect(await afterBurst(0.99 * MIN, 1.25 * MIN, 2)).toBe(0);
  });
});

describe("Arpit Bhayani, sliding window over per-second counters", () => {
  it('"user:241531": 5 requests in 1 second: exactly 5 pass per second', async () => {
    // The article's request store keeps one counter per epoch second and sums those newer than
    // now - time_window_sec; with time_window_sec 1 that is one counter: buckets 1, unweighted.
    // (Its pseudocode rejects only when the count is `> capacity` before registering, which lets
    // a 6th through; we admit exactly `limit`.)
    const second = Date.UTC(2021, 0, 1, 0, 0, 0);
    const clock = manualClock(second);
    const limiter = limiterFor({ algorithm: "sliding-window", limit: 5, window: "1s", buckets: 1, weighted: false }, clock);
    const got: boolean[] = [];
    for (let i = 0; i < 6; i++) {
      clock.set(second + i * 150);
      got.push((await limiter.consume("user:241531")).allowed);
    }
    expect(got).toEqual([true, true, true, true, true, false]);
    clock.set(second + 1000); // the next epoch second
    expect((await limiter.consume("user:241531")).allowed).toBe(true);
  });

  it("minute-level sub-aggregation over an hour (60 counters instead of 3600): the sum of the last 60 minutes", async () => {
    const hour = Date.UTC(2021, 0, 1, 2, 0, 0);
    const clock = manualClock(hour);
    const limiter = limiterFor({ algorithm: "sliding-window", limit: 100, window: "1h", buckets: 60, weighted: false }, clock);
    // 100 requests spread over the first 10 minutes of the hour...
    for (let i = 0; i < 100; i++) {
      clock.set(hour + i * 6_000);
      expect((await limiter.consume("k")).allowed).toBe(true);
    }
    // ...block the key until their minutes leave the 60-minute sum, one minute at a time.
    clock.set(hour + 59 * 60_000 + 59_999);
    expect((await limiter.peek("k")).allowed).toBe(false);
    clock.set(hour + 60 * 60_000); // minute 0 (requests 0-9) has left
    expect((await limiter.peek("k")).remaining).toBe(9);
  });
});
