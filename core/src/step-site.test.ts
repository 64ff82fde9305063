import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "./errors.js";
import { MAX_STEP_ORDINAL, parseSite } from "./step-site.js";

const refused = (site: string, message: RegExp): void =>
  assert.throws(
    () => parseSite(site),
    (e: unknown) => e instanceof FlowError && e.code === "invalid_argument" && message.test(e.message),
    site,
  );

void test("a site is a name, or a name and a call number from 0 to a Postgres integer", () => {
  assert.deepEqual(parseSite("greet"), { name: "greet", ordinal: 0 });
  assert.deepEqual(parseSite("greet#2"), { name: "greet", ordinal: 2 });
  assert.deepEqual(parseSite("a#b#3"), { name: "a#b", ordinal: 3 });
  assert.deepEqual(parseSite(`greet#${MAX_STEP_ORDINAL}`), { name: "greet", ordinal: MAX_STEP_ORDINAL });
});

void test("a call number past a Postgres integer, NUL, a lone surrogate or an empty name are refused with the reason", () => {
  refused("greet#99999999999999999999", /the call number is over 2147483647/);
  refused(`greet#${MAX_STEP_ORDINAL + 1}`, /the call number is over/);
  refused(`greet#${"9".repeat(400)}`, /^--from greet#9{24}\.\.\.: the call number/);
  refused("gr\0eet#1", /NUL/);
  refused("gr\ud800eet", /lone UTF-16 surrogate/);
  refused("", /takes a step name/);
});
