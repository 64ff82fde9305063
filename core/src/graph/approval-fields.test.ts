import { test } from "node:test";
import assert from "node:assert/strict";
import {
  APPROVAL_TEXTAREA_MAX,
  APPROVAL_TEXT_MAX,
  approvalFieldsSchemaText,
  checkApprovalFields,
  parseApprovalFields,
  parseFieldFlags,
  type ApprovalField,
} from "./approval-fields.js";

const FIELDS: ApprovalField[] = [
  { name: "reason", type: "text", required: true },
  { name: "notes", type: "textarea" },
  { name: "env", type: "select", options: ["staging", "production"], default: "staging" },
];

void test("a full answer becomes the output, every declared field present", () => {
  const r = checkApprovalFields(FIELDS, { reason: "looks fine", notes: "line 1\nline 2", env: "production" });
  assert.deepEqual(r, { ok: true, output: { reason: "looks fine", notes: "line 1\nline 2", env: "production" } });
});

void test("a field not given takes its default; an optional one without default reads as empty", () => {
  const r = checkApprovalFields(FIELDS, { reason: "ok" });
  assert.deepEqual(r, { ok: true, output: { reason: "ok", notes: "", env: "staging" } });
});

void test("a missing required field is refused with exactly the spec's sentence, then the full schema", () => {
  const r = checkApprovalFields(FIELDS, { notes: "x" });
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.message, `approval field "reason" is required\n${approvalFieldsSchemaText(FIELDS)}`);
  const schema: unknown = JSON.parse((!r.ok && r.message.split("\n").slice(1).join("\n")) || "null");
  assert.deepEqual(schema, { fields: FIELDS });
  // Empty text is no answer to a required field.
  const empty = checkApprovalFields(FIELDS, { reason: "" });
  assert.equal(!empty.ok && empty.message.split("\n")[0], 'approval field "reason" is required');
  const nul = checkApprovalFields(FIELDS, { reason: null });
  assert.equal(!nul.ok && nul.message.split("\n")[0], 'approval field "reason" is required');
});

void test("a required field with a default is satisfied by the default", () => {
  const fields: ApprovalField[] = [{ name: "env", type: "select", required: true, options: ["a", "b"], default: "b" }];
  assert.deepEqual(checkApprovalFields(fields, {}), { ok: true, output: { env: "b" } });
});

void test("a select value outside its options is refused, naming the options", () => {
  const r = checkApprovalFields(FIELDS, { reason: "x", env: "prod" });
  assert.equal(r.ok, false);
  assert.match(!r.ok ? r.message : "", /^approval field "env" must be one of "staging", "production"; got "prod"\n/);
  // Case matters: options are exact.
  assert.equal(checkApprovalFields(FIELDS, { reason: "x", env: "Production" }).ok, false);
});

void test("values are converted to the declared (text) types; objects and arrays are refused", () => {
  const fields: ApprovalField[] = [{ name: "count", type: "text" }];
  assert.deepEqual(checkApprovalFields(fields, { count: 3 }), { ok: true, output: { count: "3" } });
  assert.deepEqual(checkApprovalFields(fields, { count: true }), { ok: true, output: { count: "true" } });
  for (const bad of [{ a: 1 }, [1], Infinity]) {
    const r = checkApprovalFields(fields, { count: bad });
    assert.match(!r.ok ? r.message : "", /^approval field "count" must be a string \(a text field\)/);
  }
});

void test("a field the gate does not declare is refused, and every problem is reported at once", () => {
  const r = checkApprovalFields(FIELDS, { resaon: "typo", env: "x" });
  assert.equal(r.ok, false);
  const first = !r.ok ? r.message.split("\n")[0]! : "";
  assert.match(first, /approval field "resaon" is not declared by this gate/);
  assert.match(first, /approval field "env" must be one of/);
  assert.match(first, /approval field "reason" is required/);
});

void test("hostile values are refused: NUL, lone surrogates, over-long text; the message never echoes them whole", () => {
  const big = "a".repeat(1024 * 1024);
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ reason: "a\u0000b" }, /NUL/],
    [{ reason: "x\ud800y" }, /lone UTF-16 surrogate/],
    [{ reason: "ok", notes: "\udc00" }, /lone UTF-16 surrogate/],
    [{ reason: big }, new RegExp(`is ${big.length} characters long; at most ${APPROVAL_TEXT_MAX}`)],
    [{ reason: "ok", notes: big }, new RegExp(`at most ${APPROVAL_TEXTAREA_MAX}`)],
  ];
  for (const [submitted, want] of cases) {
    const r = checkApprovalFields(FIELDS, submitted);
    assert.equal(r.ok, false, JSON.stringify(Object.keys(submitted)));
    assert.match(!r.ok ? r.message : "", want);
    assert.ok(!r.ok && r.message.length < 2000, "the message stays short");
  }
  const hostileKey = checkApprovalFields(FIELDS, { reason: "ok", ["__proto__\u0000" + "k".repeat(5000)]: "x" });
  assert.ok(!hostileKey.ok && hostileKey.message.length < 2000);
  assert.ok(!hostileKey.ok && !hostileKey.message.includes("\u0000"));
  // A JSON body's own "__proto__" key is refused as undeclared, never merged into the output.
  const proto = checkApprovalFields(FIELDS, JSON.parse('{"reason":"ok","__proto__":{"polluted":1}}') as Record<string, unknown>);
  assert.equal(proto.ok, false);
  assert.equal(({} as Record<string, unknown>)["polluted"], undefined);
});

void test("textarea accepts multi-line text up to its limit", () => {
  const text = "line\n".repeat(Math.floor(APPROVAL_TEXTAREA_MAX / 5)).padEnd(APPROVAL_TEXTAREA_MAX, "x");
  assert.equal(text.length, APPROVAL_TEXTAREA_MAX);
  assert.equal(checkApprovalFields(FIELDS, { reason: "ok", notes: text }).ok, true);
});

void test("declarations parse to clean fields; bad ones are refused with a path per problem", () => {
  assert.deepEqual(parseApprovalFields(undefined), { ok: true, fields: [] });
  assert.deepEqual(parseApprovalFields(FIELDS), { ok: true, fields: FIELDS });
  const r = parseApprovalFields(
    [
      { name: "ok", type: "text" },
      { name: "1bad", type: "text" },
      { name: "s", type: "select" },
      { name: "t", type: "number" },
      { name: "d", type: "select", options: ["a", "a"] },
      { name: "e", type: "select", options: ["a"], default: "b" },
      { name: "ok", type: "text", colour: "red" },
      { name: "decision", type: "text" },
      "text",
    ],
    "nodes[1].config.fields",
  );
  assert.equal(r.ok, false);
  const paths = !r.ok ? r.problems.map((p) => `${p.path}: ${p.message}`) : [];
  assert.deepEqual(paths, [
    'nodes[1].config.fields[1].name: "1bad" is not allowed: use ASCII letters, digits, "_" and "-", starting with a letter or "_"',
    "nodes[1].config.fields[2].options: a select needs a non-empty array of strings",
    "nodes[1].config.fields[3].type: must be one of text, textarea, select",
    "nodes[1].config.fields[4].options: an option appears twice",
    'nodes[1].config.fields[5].default: "b" is not one of the options',
    "nodes[1].config.fields[6].colour: not a field property (name, type, required, options, default, label)",
    'nodes[1].config.fields[6].name: "ok" is declared twice',
    'nodes[1].config.fields[7].name: "decision" is reserved (the answer carries it)',
    "nodes[1].config.fields[8]: must be an object {name, type, required, options, default, label}",
  ]);
  assert.equal(parseApprovalFields({}).ok, false);
  assert.equal(parseApprovalFields(Array.from({ length: 51 }, (_, i) => ({ name: `f${i}`, type: "text" }))).ok, false);
});

void test("--field flags split at the first '='; malformed or repeated flags are refused", () => {
  assert.deepEqual(parseFieldFlags(["reason=a=b", "notes="]), { ok: true, fields: { reason: "a=b", notes: "" } });
  assert.deepEqual(parseFieldFlags(["reason"]), { ok: false, message: '--field "reason": expected <name>=<value>' });
  assert.deepEqual(parseFieldFlags(["=x"]), { ok: false, message: '--field "=x": expected <name>=<value>' });
  assert.deepEqual(parseFieldFlags(["a=1", "a=2"]), { ok: false, message: '--field "a" is given twice' });
});
