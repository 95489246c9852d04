/**
 * An error names what it got. A value JSON cannot print (nested past the engine's stack, holding
 * itself, a BigInt) was described by its `typeof`: an array given as a limit read "limits[0]: must
 * be an object (got object)", which contradicts itself. Such values are now named by kind.
 */
import { expect, it } from "vitest";
import { resolveLimits } from "../../src/index.js";
import { describeValue } from "../../src/core/errors.js";

it("names an array, an object or a BigInt that JSON cannot print by its kind", () => {
  let deep: unknown[] = [];
  for (let i = 0; i < 100_000; i++) deep = [deep];
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  expect([describeValue(deep), describeValue(circular), describeValue(10n)]).toEqual(["an array", "an object", "10n"]);
  expect(() => resolveLimits([deep as never])).toThrow("limits[0]: must be an object (got an array)");
});
