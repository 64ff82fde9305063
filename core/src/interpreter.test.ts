import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError } from "./errors.js";
import { missingInterpreterHint, pickInterpreter } from "./interpreter.js";

void test("the interpreter is picked by the file's extension", () => {
  assert.deepEqual(pickInterpreter("etl.py"), ["python3"]);
  assert.deepEqual(pickInterpreter("deploy.ts"), ["bun", "run"]);
  assert.deepEqual(pickInterpreter("build.js"), ["node"]);
  assert.deepEqual(pickInterpreter("build.mjs"), ["node"]);
  assert.deepEqual(pickInterpreter("main.go"), ["go", "run"]);
  assert.deepEqual(pickInterpreter("scripts/sub.dir/Report.PY"), ["python3"]);
});

void test("anything else runs under bash -eu", () => {
  for (const f of ["release.sh", "run", "Makefile", "x.rb", ".py", "dir.py/run", "archive.tar.gz", ""]) {
    assert.deepEqual(pickInterpreter(f), ["bash", "-eu"], f);
  }
});

void test("an --interpreter override wins and is split on whitespace", () => {
  assert.deepEqual(pickInterpreter("etl.py", "python3.12 -u"), ["python3.12", "-u"]);
  assert.deepEqual(pickInterpreter("job.sh", "  zsh\t-e  "), ["zsh", "-e"]);
  assert.deepEqual(pickInterpreter("main.go", "node"), ["node"]);
});

void test("an empty --interpreter is refused with a message that says what to give", () => {
  for (const bad of ["", "   ", "\t\n"]) {
    assert.throws(
      () => pickInterpreter("job.sh", bad),
      (err: unknown) =>
        err instanceof FlowError &&
        err.code === "invalid_argument" &&
        /--interpreter is empty/.test(err.message) &&
        err.message.includes('"job.sh"'),
    );
  }
});

void test("the returned command can be changed without changing later picks", () => {
  pickInterpreter("a.py").push("-u");
  pickInterpreter("a.sh").push("-x");
  assert.deepEqual(pickInterpreter("a.py"), ["python3"]);
  assert.deepEqual(pickInterpreter("a.sh"), ["bash", "-eu"]);
});

void test("a missing runtime is named with how to install it; bun comes from the npm package bun", () => {
  assert.match(missingInterpreterHint("bun"), /npm install -g bun.*npm package bun ships the binary/);
  assert.match(missingInterpreterHint("go"), /apt-get install golang-go/);
  assert.match(missingInterpreterHint("/usr/local/bin/python3"), /apt-get install python3/);
  assert.match(missingInterpreterHint("node"), /install Node\.js/);
  for (const other of ["zsh", "bun\0x", "../../bin/sh", "é\u2028"]) {
    const hint = missingInterpreterHint(other);
    assert.ok(hint.includes(JSON.stringify(other)) && hint.includes("--interpreter"), hint);
  }
});

void test("every runtime of the extension table has an install hint of its own", () => {
  for (const file of ["a.py", "a.ts", "a.js", "a.mjs", "a.go"]) {
    const [program] = pickInterpreter(file);
    assert.doesNotMatch(missingInterpreterHint(program!), /^install "/, file);
  }
});
