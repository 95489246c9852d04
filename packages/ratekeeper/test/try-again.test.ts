/** retryTryAgain (stores/redis/try-again.ts): TRYAGAIN is retried, bounded; nothing else is. */
import { afterEach, expect, it, vi } from "vitest";
import { retryTryAgain } from "../src/stores/redis/try-again.js";

afterEach(() => {
  vi.useRealTimers();
});

it("retries TRYAGAIN until it answers, and never another error", async () => {
  vi.useFakeTimers();
  let calls = 0;
  const p = retryTryAgain(() => (++calls < 4 ? Promise.reject(new Error("TRYAGAIN Multiple keys")) : Promise.resolve("ok")));
  await vi.runAllTimersAsync();
  expect([await p, calls]).toEqual(["ok", 4]);
  let other = 0;
  const q = retryTryAgain(() => {
    other++;
    return Promise.reject(new Error("NOSCRIPT No matching script"));
  });
  await expect(q).rejects.toThrow(/NOSCRIPT/);
  expect(other).toBe(1);
});

it("gives up after 16 retries with the TRYAGAIN error", async () => {
  vi.useFakeTimers();
  let calls = 0;
  const p = retryTryAgain(() => {
    calls++;
    return Promise.reject(new Error("TRYAGAIN Multiple keys"));
  });
  const settled = p.catch((e: unknown) => e);
  await vi.runAllTimersAsync();
  expect([String(await settled), calls]).toEqual(["Error: TRYAGAIN Multiple keys", 17]);
});
