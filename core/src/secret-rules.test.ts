import { test } from "node:test";
import assert from "node:assert/strict";
import { FlowError, httpStatusOf } from "./errors.js";
import {
  SECRET_NAME_MAX,
  SECRET_VALUE_MAX_BYTES,
  assertSecretName,
  assertSecretValue,
  envMapProblems,
  envNameProblem,
  envVariableProblem,
  secretNameProblem,
  secretValueProblem,
  variablePathKey,
} from "./secret-rules.js";

void test("ordinary secret names pass", () => {
  for (const name of [
    "API_TOKEN",
    "GITHUB_TOKEN",
    "_x",
    "a1",
    "FLOWSVC_TOKEN",
    "NODE_ENV",
    "TZ",
    "LANG",
    "GIT_AUTHOR_NAME",
    "PATH_TO_KEY",
    "HOMEPAGE_KEY",
    "X".repeat(SECRET_NAME_MAX),
  ]) {
    assert.equal(secretNameProblem(name), undefined, name);
  }
});

void test("names the loader, shells, interpreters and git read at start are refused with the reason, in any case", () => {
  const cases: Array<[string, RegExp]> = [
    ["LD_PRELOAD", /dynamic loader/],
    ["ld_preload", /dynamic loader/],
    ["Ld_Library_Path", /dynamic loader/],
    ["DYLD_INSERT_LIBRARIES", /dynamic loader/],
    ["MALLOC_CHECK_", /C library/],
    ["GCONV_PATH", /dynamic loader/],
    ["GLIBC_TUNABLES", /dynamic loader/],
    ["BASH_ENV", /shell reads it/],
    ["ENV", /shell reads it/],
    ["env", /shell reads it/],
    ["SHELLOPTS", /shell/],
    ["PS4", /shell/],
    ["IFS", /shell/],
    ["BASH_FUNC_x%%", /shell reads it/],
    ["BASH_FUNC_ls", /shell/],
    ["PATH", /which programs run/],
    ["path", /which programs run/],
    ["HOME", /configuration/],
    ["SHELL", /which programs run/],
    ["TMPDIR", /temporary files/],
    ["NODE_OPTIONS", /interpreter reads it/],
    ["NODE_PATH", /interpreter/],
    ["PYTHONSTARTUP", /interpreter/],
    ["PYTHONPATH", /interpreter/],
    ["python_gil", /interpreter/],
    ["PERL5OPT", /interpreter/],
    ["RUBYOPT", /interpreter/],
    ["JAVA_TOOL_OPTIONS", /interpreter/],
    ["_JAVA_OPTIONS", /interpreter/],
    ["GOFLAGS", /interpreter/],
    ["GIT_CONFIG_GLOBAL", /git reads it/],
    ["GIT_CONFIG_KEY_0", /git/],
    ["GIT_SSH_COMMAND", /git/],
    ["GIT_EXEC_PATH", /git/],
    ["FLOW_X", /reserved for the service's own/],
    ["flow_agent_socket", /reserved/],
  ];
  for (const [name, why] of cases) {
    const problem = secretNameProblem(name);
    assert.ok(problem, `${name} was accepted`);
    assert.match(problem, why, name);
    assert.ok(problem.includes(JSON.stringify(name)), `${name}: the message names it: ${problem}`);
  }
});

void test("a name that is not an environment variable name is refused, and a hostile one is shown escaped and cut short", () => {
  assert.match(secretNameProblem("")!, /name is empty/);
  assert.match(secretNameProblem("1BAD")!, /not an environment variable name/);
  assert.match(secretNameProblem("A-B")!, /not an environment variable name/);
  assert.match(secretNameProblem("A=B")!, /not an environment variable name/);
  assert.match(secretNameProblem("A B")!, /not an environment variable name/);
  const nul = secretNameProblem("AB\u0000CD")!;
  assert.match(nul, /not an environment variable name/);
  assert.ok(!nul.includes("\u0000") && nul.includes("\\u0000"), nul);
  assert.match(secretNameProblem("A\ud800B")!, /not an environment variable name/);
  // Look-alikes: Cyrillic А and Е, a full-width underscore, a Kelvin sign for K, a dotless ı.
  for (const name of ["АPI_TOKEN", "PАTH", "ВASH_ENV", "API＿TOKEN", "\u212AEY", "AP\u0131", "ＰＡＴＨ"]) {
    assert.match(secretNameProblem(name)!, /not an environment variable name: use ASCII letters/, name);
  }
  const long = secretNameProblem("A".repeat(SECRET_NAME_MAX + 1))!;
  assert.match(long, new RegExp(`at most ${SECRET_NAME_MAX} characters; this one has ${SECRET_NAME_MAX + 1}`));
  const huge = secretNameProblem(`${"B".repeat(5000)}-`)!;
  assert.ok(huge.length < 200, huge);
  // The syntax rule alone (what a lookup of a stored name uses) lets a reserved name through.
  assert.equal(envNameProblem("LD_PRELOAD"), undefined);
  assert.match(envNameProblem("1X")!, /not an environment variable name/);
});

void test("a value with a NUL byte or a lone surrogate is refused with why, and the value is never in the message", () => {
  const hostile = ["hunter2\u0000qz7tail", "\u0000", "qz7pass\ud800qz7word", "qz7pass\udfffqz7word", "qz7end\ud83d", "\ude00qz7start"];
  for (const value of hostile) {
    const problem = secretValueProblem(value);
    assert.ok(problem, JSON.stringify(value));
    assert.ok(!problem.includes("hunter2") && !problem.includes("qz7"), `${problem} quotes the value`);
  }
  assert.match(secretValueProblem("a\u0000b")!, /NUL byte.*a process environment cannot hold one/);
  assert.match(secretValueProblem("a\ud800b")!, /not valid Unicode text: it holds a lone surrogate/);
  assert.match(secretValueProblem("")!, /value is empty/);
});

void test("well-formed values pass, pairs of surrogates and multi-line text included", () => {
  for (const value of [
    "x",
    "s3cr3t-Välue-€-4711",
    "emoji 😀 pair",
    "line one\nline two\r\n",
    "\t tabs and spaces ",
    "x".repeat(SECRET_VALUE_MAX_BYTES),
  ]) {
    assert.equal(secretValueProblem(value), undefined, value.slice(0, 20));
  }
});

void test("the value limit counts UTF-8 bytes, not characters", () => {
  assert.match(secretValueProblem("x".repeat(SECRET_VALUE_MAX_BYTES + 1))!, /at most 65536 bytes \(UTF-8\); this one has 65537/);
  // 30,000 euro signs are 90,000 bytes: over the limit though under it in characters.
  assert.match(secretValueProblem("€".repeat(30_000))!, /this one has 90000/);
  assert.equal(secretValueProblem("€".repeat(21_845)), undefined);
});

void test("the asserts throw invalid_argument (HTTP 400) naming the field, and never the value", () => {
  assert.throws(
    () => assertSecretName("LD_PRELOAD"),
    (err: unknown) => err instanceof FlowError && err.code === "invalid_argument" && /dynamic loader/.test(err.message),
  );
  try {
    assertSecretValue("API_TOKEN", "hunter2\u0000");
    assert.fail("accepted");
  } catch (err) {
    assert.ok(err instanceof FlowError);
    assert.equal(err.code, "invalid_argument");
    assert.equal(httpStatusOf(err.code), 400);
    assert.match(err.message, /^secret API_TOKEN: the value holds a NUL byte/);
    assert.ok(!JSON.stringify(err.toJSON()).includes("hunter2"));
  }
  try {
    assertSecretName("BASH_ENV");
    assert.fail("accepted");
  } catch (err) {
    assert.ok(err instanceof FlowError);
    assert.deepEqual(err.details, { field: "name" });
  }
  assert.doesNotThrow(() => assertSecretName("API_TOKEN"));
  assert.doesNotThrow(() => assertSecretValue("API_TOKEN", "fine"));
});

/** The names every entry point of a run's environment must refuse (cli, API, FlowRun, pipeline, graph). */
const HOSTILE_ENV_NAMES: Array<[string, RegExp]> = [
  ["FLOW_TOKEN", /^env variable "FLOW_TOKEN" is refused: FLOW_\* variables are reserved/],
  ["FLOW_IDEMPOTENCY_KEY", /^env variable "FLOW_IDEMPOTENCY_KEY" is refused: FLOW_\*/],
  ["LD_PRELOAD", /^env variable "LD_PRELOAD" is refused: the dynamic loader/],
  ["LD_AUDIT", /^env variable "LD_AUDIT" is refused: the dynamic loader/],
  ["BASH_ENV", /^env variable "BASH_ENV" is refused: a shell reads it/],
  ["PATH", /^env variable "PATH" is refused: it decides which programs run/],
  ["A\u0000B", /^env variable "A\\u0000B" is not an environment variable name/],
  ["A\ud800", /^env variable "A\\ud800" is not an environment variable name/],
  ["A=B", /^env variable "A=B" is not an environment variable name/],
  ["", /^an env variable is empty$/],
  ["X".repeat(10_000), /^an env variable is at most 100 characters; this one has 10000$/],
];

void test("a run's env names follow the secret name rule, with one message for every entry point", () => {
  for (const [name, want] of HOSTILE_ENV_NAMES) assert.match(envVariableProblem(name) ?? "", want, JSON.stringify(name.slice(0, 20)));
  for (const name of ["GREETING", "TZ", "LANG", "CI_TRIGGER_REF", "FLOWSVC_X", "_a1"])
    assert.equal(envVariableProblem(name), undefined, name);
  assert.deepEqual(
    envMapProblems({ OK: "1", PATH: "/x", "A=B": "", ["Y".repeat(10_000)]: "" }).map((p) => [p.key, p.segment.length]),
    [
      ["PATH", 4],
      ['"A=B"', 3],
      [`"${"Y".repeat(64)}..."`, 67],
    ],
  );
  assert.equal(variablePathKey("A\u0000"), '"A\\u0000"');
});
