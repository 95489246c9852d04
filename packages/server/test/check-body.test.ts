/**
 * The `POST /v1/check` body's fast path (transport/check-body.ts) against the general one
 * (`JSON.parse`, then `toInput`): for every body, the fast path either declines (undefined) or
 * gives exactly what the general path gives, the same input or the same error.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkBodyInput } from "../src/transport/check-body.js";
import { toInput } from "../src/transport/check-input.js";
import { REQUEST_CAPS } from "../src/service/request-caps.js";

type Outcome = { input: unknown; keys: string } | { error: string } | undefined;

function general(text: string): Outcome {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { error: "not JSON" };
  }
  try {
    const input = toInput(body, "");
    return { input, keys: shapeOf(input) };
  } catch (e) {
    return { error: `${(e as Error).name}: ${(e as Error).message}` };
  }
}

function fast(text: string): Outcome {
  try {
    const input = checkBodyInput(text);
    return input === undefined ? undefined : { input, keys: shapeOf(input) };
  } catch (e) {
    return { error: `${(e as Error).name}: ${(e as Error).message}` };
  }
}

/** Every object's keys in order, so `{key, value}` and `{value, key}` differ. */
function shapeOf(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(shapeOf).join(",")}]`;
  if (v !== null && typeof v === "object")
    return `{${Object.entries(v)
      .map(([k, x]) => `${k}:${shapeOf(x)}`)
      .join(",")}}`;
  return String(v);
}

function same(text: string): void {
  const f = fast(text);
  if (f === undefined) return;
  const g = general(text);
  expect(f, text).toEqual(g);
  if (g !== undefined && "input" in g) expect(g.keys).toMatch(/^\{domain:/);
}

const TAKEN = [
  '{"domain":"api","descriptors":[{"user_id":"42"}]}',
  ' {\n\t"domain" : "api" , "descriptors" : [ { "user_id" : "42" , "path" : "/x" } ] }\r\n',
  '{"descriptors":[{"user_id":"42"}],"domain":"api"}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":3}',
  '{"domain":"api","cost":0,"descriptors":[[{"key":"user_id","value":"42"}]]}',
  '{"domain":"api","descriptors":[[{"value":"42","key":"user_id"},{"key":"path","value":"/a"}],{"b":"1"}]}',
  '{"domain":"web","descriptors":[{"remote_address":"10.0.0.1"},{"remote_address":"10.0.0.2","path":"/search/x"}]}',
];

const DECLINED_OR_SAME = [
  "",
  "   ",
  "{}",
  "[]",
  "null",
  '"x"',
  '{"checks":[{"domain":"api","descriptors":[{"user_id":"1"}]}]}',
  '[{"domain":"api","descriptors":[{"user_id":"1"}]}]',
  '{"domain":"api","descriptors":[{"user_id":"42"}]} x',
  '{"domain":"api","descriptors":[{"user_id":"42"}]',
  '{"domain":"api","descriptors":[{"user_id":"42"}],}',
  '{"domain":"api","descriptors":[{"user_id":"42",}]}',
  '{"domain":"api","domain":"web","descriptors":[{"user_id":"42"}]}',
  '{"domain":"api","descriptors":[{"user_id":"1","user_id":"2"}]}',
  '{"domain":"api","descriptors":[{"2":"a","1":"b"}]}',
  '{"domain":"api","descriptors":[{"__proto__":"a"}]}',
  '{"domain":"api","descriptors":[{"constructor":"a","toString":"b"}]}',
  '{"domain":"api","descriptors":[{"user_id":"4\\"2"}]}',
  '{"domain":"api","descriptors":[{"user_id":"\\u0034"}]}',
  '{"domain":"api","descriptors":[{"user_id":"é"}]}',
  '{"domain":"api","descriptors":[{"user_id":"\ud800"}]}',
  '{"domain":"api","descriptors":[{"user_id":""}]}',
  '{"domain":"api","descriptors":[{"":"x"}]}',
  '{"domain":"api","descriptors":[{}]}',
  '{"domain":"api","descriptors":[[]]}',
  '{"domain":"api","descriptors":[]}',
  '{"domain":"","descriptors":[{"user_id":"42"}]}',
  '{"descriptors":[{"user_id":"42"}]}',
  '{"domain":"api"}',
  '{"domain":1,"descriptors":[{"user_id":"42"}]}',
  '{"domain":"api","descriptors":[{"user_id":42}]}',
  '{"domain":"api","descriptors":[[{"key":"user_id","value":"42","x":1}]]}',
  '{"domain":"api","descriptors":[[{"key":"user_id"}]]}',
  '{"domain":"api","descriptors":[[{"key":"a","key":"b","value":"c"}]]}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":1.5}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":-1}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":1e3}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":01}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":"2"}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":null}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":99999999999999999999}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"cost":1,"cost":2}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"extra":true}',
  '{"key":"user:1","policy":"login"}',
  '{"domain":"api","descriptors":[{"user_id":"42"}],"key":"k"}',
  `{"domain":"api","descriptors":[${Array.from({ length: 65 }, (_, i) => `{"u":"${i}"}`).join(",")}]}`,
  `{"domain":"api","descriptors":[{${Array.from({ length: 33 }, (_, i) => `"k${i}":"v"`).join(",")}}]}`,
  `{"domain":"api","descriptors":[{"${"k".repeat(300)}":"v"}]}`,
  `{"domain":"${"d".repeat(300)}","descriptors":[{"user_id":"42"}]}`,
  `{"domain":"api","descriptors":[{"user_id":"${"9".repeat(600)}"}]}`,
];

describe("POST /v1/check body fast path", () => {
  it("takes the common single-check bodies, as the general path reads them", () => {
    for (const text of TAKEN) {
      expect(fast(text), text).not.toBeUndefined();
      same(text);
    }
  });

  it("declines or agrees on odd, invalid and hostile bodies", () => {
    for (const text of DECLINED_OR_SAME) same(text);
  });

  it("declines lists past the request caps before reading them (a descriptor's duplicate-name scan is quadratic)", () => {
    // A 64 KB body can hold a descriptor of 5,000 entries: read here, its duplicate scan took 50 ms
    // where the general path takes 3 ms to refuse it. Past the caps the fast path gives up at once
    // and the general path answers (the same error as before).
    const entries = (n: number) => Array.from({ length: n }, (_, i) => `"k${i}":"v"`).join(",");
    const pairs = (n: number) => Array.from({ length: n }, (_, i) => `{"key":"k${i}","value":"v"}`).join(",");
    const bodies = [
      `{"domain":"api","descriptors":[{${entries(REQUEST_CAPS.entries + 1)}}]}`,
      `{"domain":"api","descriptors":[{${entries(5_000)}}]}`,
      `{"domain":"api","descriptors":[[${pairs(REQUEST_CAPS.entries + 1)}]]}`,
      `{"domain":"api","descriptors":[${Array.from({ length: REQUEST_CAPS.descriptors + 1 }, () => '{"a":"b"}').join(",")}]}`,
    ];
    for (const text of bodies) {
      expect(fast(text), text.slice(0, 60)).toBeUndefined();
      expect(general(text)).toMatchObject({ error: expect.stringContaining("at most") as unknown });
    }
    // At the caps exactly, the fast path still reads the body.
    expect(fast(`{"domain":"api","descriptors":[{${entries(REQUEST_CAPS.entries)}}]}`)).not.toBeUndefined();
  });

  it("declines a body that is not JSON", () => {
    for (const text of [
      "",
      "{}",
      '{"domain":"api","descriptors":[{"user_id":"42"}]} x',
      '{"domain":"api","descriptors":[{"user_id":"42"}],}',
    ])
      expect(fast(text), text).toBeUndefined();
  });

  const name = fc.constantFrom(
    "domain",
    "descriptors",
    "cost",
    "key",
    "value",
    "policy",
    "checks",
    "user_id",
    "1",
    "0",
    "__proto__",
    "",
    "a b",
    "é",
  );
  const leaf = fc.oneof(
    fc.constantFrom("api", "web", "42", "", "x\\y", 'q"', "\u0000", "é"),
    fc.integer({ min: -2, max: 5 }),
    fc.constantFrom(1.5, 1e21, null, true),
  );
  const entryList = fc.array(fc.record({ key: leaf, value: leaf }, { requiredKeys: [] }), { maxLength: 3 });
  const entryObject = fc.dictionary(name, leaf, { maxKeys: 4 });
  const check = fc.record(
    {
      domain: leaf,
      descriptors: fc.array(fc.oneof(entryList, entryObject, leaf), { maxLength: 4 }),
      cost: leaf,
      key: leaf,
      extra: leaf,
    },
    { requiredKeys: [] },
  );
  const spaced = (text: string, seed: number) =>
    text.replace(/[{}[\],:]/g, (c) => ((seed = (seed * 31 + 7) % 97) % 3 === 0 ? ` ${c}\n` : c));

  it("agrees with the general path on generated checks (property)", () => {
    fc.assert(
      fc.property(check, fc.nat(), (body, seed) => {
        const text = JSON.stringify(body);
        same(text);
        same(spaced(text, seed));
      }),
      { numRuns: 3000 },
    );
  });

  it("agrees with the general path on generated checks cut or changed at one place (property)", () => {
    fc.assert(
      fc.property(check, fc.nat(), fc.constantFrom("", '"', ",", "}", "]", "\\", "0", " ", "x"), (body, at, c) => {
        const text = JSON.stringify(body);
        const i = at % (text.length + 1);
        same(text.slice(0, i));
        same(text.slice(0, i) + c + text.slice(i));
        same(text.slice(0, i) + c + text.slice(i + 1));
      }),
      { numRuns: 3000 },
    );
  });
});
