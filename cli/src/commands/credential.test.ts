/**
 * `flow credential set` and `flow submit --credential` refusals, in process: each is refused before
 * stdin is read or a request is sent (no server runs here: a request would fail differently).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Stdio } from "../print.js";
import { runCli } from "./program.js";
import { credentialBody } from "./credential.js";

const TOKEN = "cli-T0ken-not-on-argv";

interface TestStdio extends Stdio {
  readonly lines: string[];
  reads: number;
}

/** Everything written goes to `lines`; stdin answers `stdin` and counts the reads. */
const stdio = (stdin = ""): TestStdio => {
  const io: TestStdio = {
    lines: [],
    reads: 0,
    write: (d) => {
      io.lines.push(String(d));
      return Promise.resolve();
    },
    out: (t) => void io.lines.push(t),
    note: (t) => void io.lines.push(t),
    stdinIsTty: () => false,
    readStdin: () => {
      io.reads++;
      return Promise.resolve(stdin);
    },
  };
  return io;
};

const flow = async (args: string[]): Promise<{ code: number; stderr: string; reads: number }> => {
  const io = stdio(TOKEN);
  const code = await runCli(["node", "flow", ...args], { env: { FLOWSVC_URL: "http://127.0.0.1:9" }, io, now: () => new Date(0) });
  return { code, stderr: io.lines.join("\n"), reads: io.reads };
};

void test("a token or password on the command line is refused, before stdin is read and without echoing it", async () => {
  for (const args of [
    ["credential", "set", "gh", "--kind", "bearer", "--token", TOKEN],
    ["credential", "set", "hook", "--kind", "url-token", "--token", TOKEN],
    ["credential", "set", "reg", "--kind", "basic", "--username", "ci", "--password", TOKEN],
  ]) {
    const r = await flow(args);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--(token|password) takes only -, and reads the value from stdin/);
    assert.ok(!r.stderr.includes(TOKEN), r.stderr);
    assert.equal(r.reads, 0);
  }
});

void test("a kind's missing or foreign flags, a bad kind and a bad name are usage errors that name the flag", async () => {
  const cases: Array<[string[], RegExp]> = [
    [["credential", "set", "gh", "--kind", "bearer"], /--token is required: a bearer credential takes --token/],
    [
      ["credential", "set", "k", "--kind", "api-key", "--value", "v"],
      /--header is required: an api-key credential takes --header and --value/,
    ],
    [
      ["credential", "set", "k", "--kind", "basic", "--username", "u", "--password", "-", "--header", "X"],
      /--header is not a flag of this kind/,
    ],
    [["credential", "set", "k", "--kind", "oauth"], /--kind.*oauth.*bearer, api-key, basic, url-token/],
    [["credential", "set", "k"], /--kind/],
    [["credential", "set", "../k", "--kind", "bearer", "--token", "-"], /credential name "..\/k" is not allowed/],
    [["submit", "x.sh", "--credential", "LD_PRELOAD=gh"], /credential variable "LD_PRELOAD" is refused: the dynamic loader/],
    [["submit", "x.sh", "--credential", "GH_TOKEN"], /expected ENV_VAR=credential_name/],
  ];
  for (const [args, want] of cases) {
    const r = await flow(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, want, args.join(" "));
    assert.equal(r.reads, 0, "stdin is not read for a refused command");
  }
});

void test("the body reads the one - field from stdin, without its trailing newline, and applies core's rules", async () => {
  assert.deepEqual(await credentialBody(stdio(`${TOKEN}\n`), "gh", { kind: "bearer", token: "-" }), { kind: "bearer", token: TOKEN });
  assert.deepEqual(await credentialBody(stdio("k-1"), "llm", { kind: "api-key", header: "x-api-key", value: "-" }), {
    kind: "api_key",
    header: "x-api-key",
    value: "k-1",
  });
  assert.deepEqual(await credentialBody(stdio(), "llm", { kind: "api-key", header: "x-api-key", value: "inline" }), {
    kind: "api_key",
    header: "x-api-key",
    value: "inline",
  });
  assert.deepEqual(await credentialBody(stdio("pw\r\n"), "reg", { kind: "basic", username: "ci", password: "-" }), {
    kind: "basic",
    username: "ci",
    password: "pw",
  });
  await assert.rejects(credentialBody(stdio("a\u0000b"), "gh", { kind: "bearer", token: "-" }), /token: .*NUL byte/);
  await assert.rejects(credentialBody(stdio(""), "gh", { kind: "bearer", token: "-" }), /token: the value is empty/);
});
