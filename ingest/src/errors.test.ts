import { test } from "node:test";
import assert from "node:assert/strict";
import { toFlowError } from "./errors.js";

void test("regression (soak): Postgres's disk_full (53100) is a 503 that says the disk is full and nothing was recorded, not an internal 500", () => {
  // The shape pg gives a server error: a message and the SQLSTATE in `code`.
  const pgError = Object.assign(new Error('could not extend file "base/16384/2619": No space left on device'), { code: "53100" });
  const fe = toFlowError(pgError);
  assert.equal(fe.code, "unavailable");
  assert.match(fe.message, /^the database's disk is full: nothing was recorded$/);
  assert.match(fe.hint ?? "", /free space/);
  assert.equal(toFlowError(Object.assign(new Error("x"), { code: "23505" })).code, "internal", "other database errors stay internal");
});
