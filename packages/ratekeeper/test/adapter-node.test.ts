import type { IncomingMessage } from "node:http";
import { describe } from "vitest";
import { start } from "../../../examples/node/app.js";
import { behaviourTable, realDriver } from "./http-table.js";

const driver = realDriver("node:http", start, (req) => ((req as IncomingMessage).url ?? "/").split("?")[0] as string);

describe("node:http adapter (examples/node over real HTTP)", () => {
  behaviourTable(driver);
});
