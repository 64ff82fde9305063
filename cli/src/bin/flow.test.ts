/**
 * The compiled `flow` binary with no server behind it: usage errors, unreachable servers, help
 * text and which URL wins. Commands against an API are in flow-api.test.ts.
 */
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, test } from "node:test";
import { freshHome, removeHomes, runFlow } from "./fake-flowsvc.js";

// Ports nothing listens on: connecting is refused at once.
const CLOSED_A = "http://127.0.0.1:1";
const CLOSED_B = "http://127.0.0.1:2";
const CLOSED_C = "http://127.0.0.1:3";

after(removeHomes);

const isolated = async (extra: Record<string, string> = {}): Promise<Record<string, string>> => {
  const { home, configPath } = await freshHome();
  return { HOME: home, FLOWSVC_CONFIG: configPath, ...extra };
};

void test("an unreachable server is exit 1 with one error line and a line saying how to start it", async () => {
  const r = await runFlow(["runs", "ls"], { env: await isolated({ FLOWSVC_URL: CLOSED_A }) });
  assert.equal(r.code, 1);
  assert.equal(r.stdout, "");
  const lines = r.stderr.trimEnd().split("\n");
  assert.deepEqual(lines, [
    `error: cannot reach flowsvc at ${CLOSED_A}`,
    "start it with `npm start` (or `flow server`), or set --url / FLOWSVC_URL",
  ]);
});

void test("--url beats FLOWSVC_URL, which beats the saved config", async () => {
  const env = await isolated({ FLOWSVC_URL: CLOSED_B });
  await writeFile(env.FLOWSVC_CONFIG ?? "", JSON.stringify({ url: CLOSED_C, token: "t", project: "a/b" }));
  const flag = await runFlow(["--url", CLOSED_A, "runs", "ls"], { env });
  assert.match(flag.stderr, /cannot reach flowsvc at http:\/\/127\.0\.0\.1:1\n/);
  const fromEnv = await runFlow(["runs", "ls"], { env });
  assert.match(fromEnv.stderr, /cannot reach flowsvc at http:\/\/127\.0\.0\.1:2\n/);
  const fromFile = await runFlow(["runs", "ls"], { env: { ...env, FLOWSVC_URL: "" } });
  assert.match(fromFile.stderr, /cannot reach flowsvc at http:\/\/127\.0\.0\.1:3\n/);
});

void test("a global flag is accepted after the command too", async () => {
  const r = await runFlow(["status", "run-x", "--url", CLOSED_A], { env: await isolated() });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /cannot reach flowsvc at http:\/\/127\.0\.0\.1:1\n/);
});

const usageCases: Array<[string, string[], RegExp]> = [
  ["an unknown option", ["runs", "ls", "--bogus"], /^error: unknown option '--bogus'/],
  ["--env without =", ["submit", "f.sh", "--env", "NOPE"], /^error: option '--env <NAME=VALUE>' argument 'NOPE' is invalid/],
  ["--env with an empty name", ["submit", "f.sh", "--env", "=x"], /^error: option '--env <NAME=VALUE>' argument '=x' is invalid/],
  [
    "--env PATH (refused, not ignored: core's env rule)",
    ["submit", "f.sh", "--env", "PATH=/x"],
    /^error: option '--env <NAME=VALUE>' argument 'PATH=\/x' is invalid\. env variable "PATH" is refused: it decides which programs run/,
  ],
  [
    "--env with a 10,000-character name, cut short",
    ["submit", "f.sh", "--env", `${"X".repeat(10_000)}=x`],
    /^error: option '--env <NAME=VALUE>' argument 'X{64}\.\.\.' is invalid\. an env variable is at most 100 characters; this one has 10000\.\n/,
  ],
  ["--credential on a pipeline", ["submit", "p.yaml", "--credential", "A=b"], /^error: --credential is refused on a pipeline submit/],
  [
    "--as yaml with --credential",
    ["submit", "f.sh", "--as", "yaml", "--credential", "A=b"],
    /^error: --credential is refused on a pipeline submit/,
  ],
  ["an unknown -o format", ["runs", "ls", "-o", "xml"], /^error: option '-o, --output <format>' argument 'xml' is invalid/],
  ["a missing argument", ["status"], /^error: missing required argument 'run'/],
  ["--limit 0", ["runs", "ls", "--limit", "0"], /^error: option '--limit <n>' argument '0' is invalid/],
  ["--payload that is not JSON", ["emit", "x.y", "--payload", "{nope"], /^error: option '--payload <json>' argument '\{nope' is invalid/],
  [
    "--project without a slash",
    ["--project", "nope", "runs", "ls"],
    /^error: option '--project <org\/project>' argument 'nope' is invalid/,
  ],
  ["a group without its subcommand", ["secret"], /^error: `flow secret` needs a subcommand/],
  ["no command at all", [], /^error: `flow` needs a command/],
];

for (const [what, args, message] of usageCases) {
  void test(`a usage error exits 2: ${what}`, async () => {
    const r = await runFlow(args, { env: await isolated({ FLOWSVC_URL: CLOSED_A }) });
    assert.equal(r.code, 2, r.stderr);
    const errorLine = r.stderr.split("\n").findIndex((l) => l.startsWith("error: "));
    assert.ok(errorLine >= 0, r.stderr);
    assert.match(r.stderr.split("\n").slice(errorLine).join("\n"), message);
    assert.ok((r.stderr.split("\n")[errorLine + 1] ?? "").length > 0, "a hint line follows the error");
    assert.equal(r.stdout, "");
  });
}

void test("a bad FLOWSVC_URL is a config error naming the variable, exit 2", async () => {
  const r = await runFlow(["runs", "ls"], { env: await isolated({ FLOWSVC_URL: "ftp://x" }) });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^error: bad environment: FLOWSVC_URL: /);
});

void test("a saved config that is not JSON is a config error that says how to fix it", async () => {
  const env = await isolated();
  await writeFile(env.FLOWSVC_CONFIG ?? "", "{not json");
  const r = await runFlow(["runs", "ls"], { env });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /is not valid JSON\n.*flow login/);
});

const COMMANDS = [
  [],
  ["submit"],
  ["follow"],
  ["runs"],
  ["runs", "ls"],
  ["status"],
  ["steps"],
  ["secret"],
  ["secret", "set"],
  ["secret", "list"],
  ["secret", "get"],
  ["secret", "rm"],
  ["events"],
  ["events", "ls"],
  ["events", "show"],
  ["emit"],
  ["login"],
  ["server"],
];

void test("every command's --help shows an example and exits 0", async () => {
  for (const path of COMMANDS) {
    const r = await runFlow([...path, "--help"], { env: await isolated() });
    assert.equal(r.code, 0, path.join(" "));
    assert.match(r.stdout, /Examples:\n\s+.*\bflow\b/, `flow ${path.join(" ")} --help`);
  }
});

void test("a subcommand's help lists the global --url, --token and --project", async () => {
  const r = await runFlow(["submit", "--help"], { env: await isolated() });
  assert.match(r.stdout, /--url <url>/);
  assert.match(r.stdout, /--project <org\/project>/);
});

void test("--version prints the version", async () => {
  const r = await runFlow(["--version"], { env: await isolated() });
  assert.equal(r.code, 0);
  assert.match(r.stdout, /^\d+\.\d+\.\d+\n$/);
});

void test("an in-script command outside a script fails with an error line, not a stack", async () => {
  const r = await runFlow(["sleep", "5s"], { env: await isolated() });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /^error: /m);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});

void test("submit of a missing file is a usage error naming the file", async () => {
  const env = await isolated({ FLOWSVC_URL: CLOSED_A });
  const r = await runFlow(["submit", join(env.HOME ?? "", "missing.sh")], { env });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^error: cannot read .*missing\.sh: no such file\n/);
});
