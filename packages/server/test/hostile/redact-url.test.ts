/**
 * The PostgreSQL URL is logged ("overrides loaded"), written by the overrides commands and named
 * by OverrideStoreOpenError with its password removed (redactUrl). pg also takes the password,
 * and sslpassword, from the query string (pg-connection-string copies every parameter into the
 * config), so those must be removed too: the URL's user-info is not the only place.
 */
import { describe, expect, it } from "vitest";
import { redactUrl } from "../../src/overrides/postgres.js";

describe("redactUrl", () => {
  it("removes the password wherever pg reads it: user-info, ?password=, ?sslpassword=", () => {
    expect(redactUrl("postgres://u:s3cret@db:5432/rk")).not.toContain("s3cret");
    for (const url of [
      "postgres://u@db:5432/rk?password=s3cret",
      "postgresql://u@db/rk?sslmode=require&sslpassword=s3cret",
      "postgres://u@db/rk?PASSWORD=s3cret&application_name=rk",
    ]) {
      const r = redactUrl(url);
      expect(r, url).not.toContain("s3cret");
      expect(r).toContain("u@db");
    }
    expect(redactUrl("postgres://u@db/rk?application_name=rk")).toBe("postgres://u@db/rk?application_name=rk");
  });
});
