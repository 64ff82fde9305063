import assert from "node:assert/strict";
import { test } from "node:test";
import { FlowError } from "@flowsvc/core";
import { printError } from "./print-error.js";
import { captureStdio } from "./testing/capture-stdio.js";

const capture = captureStdio;

void test("an error is one `error:` line, then its hint, and the exit status of its code", () => {
  const c = capture();
  assert.equal(printError(c.io, new FlowError("invalid_argument", "bad flag", { hint: "see --help" })), 2);
  assert.deepEqual(c.err, ["error: bad flag", "see --help"]);
  assert.deepEqual(c.out, []);
  assert.equal(printError(capture().io, new FlowError("unavailable", "down")), 1);
  assert.equal(printError(capture().io, new FlowError("config", "bad env")), 2);
  const twice = capture();
  printError(
    twice.io,
    new FlowError("config", "bad key; generate one with: openssl rand -base64 32", { hint: "generate one with: openssl rand -base64 32" }),
  );
  assert.deepEqual(
    twice.err,
    ["error: bad key; generate one with: openssl rand -base64 32"],
    "a hint the message ends with is not printed twice",
  );
});

void test("an unexpected error still prints one error line and exits 1", () => {
  const c = capture();
  assert.equal(printError(c.io, new TypeError("x is undefined")), 1);
  assert.equal(c.err[0], "error: x is undefined");
  assert.equal(c.err.length, 2);
});

void test("an error's message and hint reach the terminal without control sequences or bidi overrides", () => {
  const c = capture();
  printError(c.io, new FlowError("not_found", "run r\u001b[2J\u001b]0;pwned\u0007 not found", { hint: "try \u202egnp.exe\u009b31m" }));
  assert.deepEqual(c.err, ["error: run r\\x1b[2J\\x1b]0;pwned\\x07 not found", "try \\u202egnp.exe\\x9b31m"]);
  const plain = capture();
  printError(plain.io, new Error("boom\r\u0000"));
  assert.equal(plain.err[0], "error: boom\\x0d\\x00");
});

void test("a refused document's problems print one error line each, as flow check prints them", () => {
  const graph = capture();
  const problems = [
    { path: "nodes[0].config", message: 'unknown key "urll"' },
    { path: "edges[1].to", message: 'no node has id "b"' },
  ];
  const joined = 'nodes[0].config: unknown key "urll"; edges[1].to: no node has id "b"';
  assert.equal(printError(graph.io, new FlowError("invalid_argument", joined, { details: { problems } })), 2);
  assert.deepEqual(graph.err, ['error: nodes[0].config: unknown key "urll"', 'error: edges[1].to: no node has id "b"']);
  const pipeline = capture();
  printError(
    pipeline.io,
    new FlowError("invalid_argument", "line 4, column 5: jobs.a: bad\u001b", {
      details: { problems: [{ line: 4, column: 5, path: "jobs.a", message: "bad\u001b" }] },
    }),
  );
  assert.deepEqual(pipeline.err, ["error: line 4, column 5: jobs.a: bad\\x1b"]);
  // Anything else in details.problems, or a message that wraps the problems: the message as it is.
  const other = capture();
  printError(other.io, new FlowError("invalid_argument", "as is", { details: { problems: ["a string"] } }));
  assert.deepEqual(other.err, ["error: as is"]);
  const wrapped = capture();
  printError(wrapped.io, new FlowError("invalid_argument", `reaction.source: ${joined}`, { details: { problems } }));
  assert.deepEqual(wrapped.err, [`error: reaction.source: ${joined}`]);
});
