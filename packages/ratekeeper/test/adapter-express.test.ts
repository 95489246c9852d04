import type { Request } from "express";
import { describe } from "vitest";
import { start } from "../../../examples/express/app.js";
import { behaviourTable, realDriver } from "./http-table.js";

const driver = realDriver("express", start, (req) => (req as Request).path);

describe("Express adapter (examples/express over real HTTP)", () => {
  behaviourTable(driver);
});
