import assert from "node:assert/strict";
import { test } from "node:test";
import { parse as parseYaml } from "yaml";
import {
  formatAge,
  formatDetails,
  formatDocument,
  formatDuration,
  formatJsonCell,
  formatTable,
  formatTime,
  printable,
} from "./print-format.js";

const now = new Date("2025-01-31T12:00:00.000Z");

void test("a table aligns every column on its widest cell and does not pad the last", () => {
  const rows = [
    { a: "run-1", b: "succeeded", c: "x" },
    { a: "run-22", b: "failed", c: "longer" },
  ];
  const text = formatTable(
    [
      { header: "ID", value: (r: (typeof rows)[0]) => r.a },
      { header: "STATUS", value: (r) => r.b },
      { header: "C", value: (r) => r.c },
    ],
    rows,
  );
  assert.equal(text, "ID      STATUS     C\nrun-1   succeeded  x\nrun-22  failed     longer\n");
});

void test("a newline inside a cell does not break the table", () => {
  assert.equal(formatTable([{ header: "E", value: (r: string) => r }], ["a\nb"]), "E\na b\n");
});

void test("json output is one document with the fields as given; yaml parses back to the same value", () => {
  const value = [{ id: "run-1", status: "parked", substate: { name: "sleep" } }];
  assert.equal(formatDocument(value, "json"), `${JSON.stringify(value, null, 2)}\n`);
  assert.deepEqual(parseYaml(formatDocument(value, "yaml")), value);
  assert.equal(formatDocument([], "json"), "[]\n");
});

void test("details align values and indent the lines of a multi-line value", () => {
  assert.equal(
    formatDetails([
      ["id", "run-1"],
      ["output", '{\n  "a": 1\n}'],
    ]),
    'id:      run-1\noutput:  {\n           "a": 1\n         }\n',
  );
});

void test("times read as ages relative to now, or ISO with the age", () => {
  assert.equal(formatAge("2025-01-31T11:59:18.000Z", now), "42s ago");
  assert.equal(formatAge("2025-01-31T09:00:00.000Z", now), "3h ago");
  assert.equal(formatAge("2025-02-02T12:00:00.000Z", now), "in 2d");
  assert.equal(formatAge(null, now), "-");
  assert.equal(formatAge("2025-01-31T11:59:59.500Z", now), "0s ago");
  assert.equal(formatTime("2025-01-31T11:55:00Z", now), "2025-01-31T11:55:00.000Z (5m ago)");
  assert.equal(formatDuration(999), "999ms");
  assert.equal(formatDuration(61_000), "1m");
});

void test("a JSON cell is compact and cut with an ellipsis", () => {
  assert.equal(formatJsonCell({ a: 1 }), '{"a":1}');
  assert.equal(formatJsonCell("x".repeat(100), 10), `"${"x".repeat(8)}…`);
});

void test("tables and details show control characters and bidi overrides as escapes; line breaks, tabs and other text stay", () => {
  const rows = [{ name: "evil\u001b[31m\u202e", note: "é 日本 \u{1f600}" }];
  assert.equal(
    formatTable(
      [
        { header: "NAME", value: (r: (typeof rows)[number]) => r.name },
        { header: "NOTE", value: (r: (typeof rows)[number]) => r.note },
      ],
      rows,
    ),
    `${"NAME".padEnd(18)}  NOTE\nevil\\x1b[31m\\u202e  é 日本 \u{1f600}\n`,
  );
  assert.equal(formatDetails([["error", "a\u0007b\nc\td\u2066"]]), "error:  a\\x07b\n        c\td\\u2066\n");
  assert.equal(printable("\u0000\u007f\u0085\u061c\u200f ok"), "\\x00\\x7f\\x85\\u061c\\u200f ok");
});
