/**
 * The CommandSpec commands' parse without commander (spec.ts's fastParse) against commander's own parse of the
 * same table (spec-commander.ts), on the same argvs: whenever fastParse answers, commander accepts the
 * argv and calls the same leaf with the same arguments, options and global flags; everything else
 * (help, errors) is left to commander. And the plain calls users type are parsed without commander.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Command, CommanderError } from "commander";
import type { CommandDeps } from "./context.js";
import { GLOBAL_OPTIONS } from "./parsers.js";
import { commanderFrom, optionFrom } from "./spec-commander.js";
import { argumentsOf, fastParse, flagOf, isCommandSpec } from "./spec.js";
import type { CommandSpec, Invocation } from "./spec.js";
import { COMMANDS } from "./table.js";

const deps = {} as CommandDeps;

const allSpecs = async (): Promise<CommandSpec[]> => {
  const definitions = await Promise.all(COMMANDS.map((c) => c.load()));
  return definitions.filter(isCommandSpec);
};

type Outcome = { leaf: string; call: Invocation } | { error: string };

const silence = (cmd: Command): void => {
  cmd.exitOverride().configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
  for (const sub of cmd.commands) silence(sub);
};

/** commander's reading of `tokens` (argv past node and the script): the leaf it called and with what, or its error code. */
const commanderParse = async (spec: CommandSpec, tokens: readonly string[]): Promise<Outcome> => {
  let outcome: Outcome | undefined;
  const program = new Command("flow").version("0.0.0", "-V, --version");
  for (const option of GLOBAL_OPTIONS) program.addOption(optionFrom(option));
  program.addCommand(
    commanderFrom(spec, deps, (leaf, call) => {
      outcome = { leaf: leaf.name, call };
      return Promise.resolve();
    }),
  );
  silence(program);
  try {
    await program.parseAsync([...tokens], { from: "user" });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    return { error: err.code };
  }
  return outcome ?? { error: "no action" };
};

/** Plain calls: fastParse must take them (else the command silently went back to commander). Every leaf has one at least. */
const PLAIN: Record<string, string[][]> = {
  status: [
    ["status", "run-1"],
    ["status", "run-1", "-o", "json"],
    ["--url", "http://h:1", "status", "r", "--output=yaml"],
    ["status", "r", "-oyaml"],
  ],
  runs: [
    ["runs", "ls"],
    ["runs", "list", "--status", "failed", "--limit", "5", "--tag", "t"],
    ["runs", "ls", "--project", "a/b", "-o", "json"],
  ],
  submit: [
    ["submit", "job.sh"],
    ["submit", "job.sh", "--env", "A=1", "--env", "A=2", "--env=B=x=y", "--tag", "a", "--tag", "b", "--follow"],
    ["submit", "g.json", "--as", "graph", "--input", '{"a":1}', "--idempotency-key", "k", "--retry", "3,10s"],
    ["--token", "t", "submit", "job.py", "--interpreter", "python3 -u", "--credential", "GH=github"],
  ],
  follow: [["follow", "run-1"]],
  steps: [["steps", "run-1", "-o", "yaml"]],
  signal: [
    ["signal", "run-1", "go"],
    ["signal", "run-1", "go", "--payload", '{"a":[1]}'],
  ],
  emit: [
    ["emit", "deploy.done"],
    ["emit", "x", "--key", "acme/web", "--payload", "null"],
  ],
  approve: [
    ["approve", "run-1"],
    ["approve", "run-1", "review", "--field", "reason=ok", "--field", "env=prod", "--reject"],
  ],
  rerun: [["rerun", "run-1", "--from", "test#2", "--follow"]],
  cancel: [
    ["cancel", "run-1"],
    ["cancel", "run-1", "--reason", "superseded"],
  ],
  secret: [
    ["secret", "set", "API_TOKEN", "-"],
    ["secret", "list"],
    ["secret", "ls", "-o", "json"],
    ["secret", "get", "API_TOKEN"],
    ["secret", "rm", "API_TOKEN"],
  ],
  credential: [
    ["credential", "set", "gh", "--kind", "bearer", "--token", "-"],
    ["credential", "set", "llm", "--kind", "api-key", "--header", "x-api-key", "--value", "-"],
    ["credential", "ls"],
    ["credential", "rm", "gh"],
  ],
  account: [
    ["account", "list"],
    ["account", "disable", "github"],
    ["account", "rm", "github"],
  ],
  member: [
    ["member", "ls"],
    ["member", "set", "ann", "--role", "member"],
    ["member", "rm", "ann"],
  ],
  user: [
    ["user", "add", "ann", "--role", "member"],
    ["user", "add", "ann", "--role=viewer", "-o", "json"],
  ],
  token: [
    ["token", "create"],
    ["token", "create", "--label", "ci on laptop", "-o", "yaml"],
    ["token", "ls"],
    ["token", "list", "-o", "json"],
    ["token", "rm", "tok-1", "--force"],
  ],
  events: [
    ["events", "ls"],
    ["events", "ls", "--type", "deploy.done", "--key", "k", "--since", "2h", "--limit", "5", "-o", "json"],
    ["events", "show", "evt-1"],
    ["events", "catalog"],
  ],
  "event-hook": [
    ["event-hook", "set", "deploys", "--event-type", "deploy.requested"],
    ["event-hook", "set", "gh", "--manifest", "github", "--key", "-"],
    ["event-hook", "ls"],
    ["event-hook", "show", "gh"],
    ["event-hook", "rm", "gh"],
    ["event-hook", "rotate", "gh", "-o", "json"],
  ],
  handler: [
    ["handler", "set", "router", "router.sh", "--on", "deploy.*,run.failed", "--tag", "t", "--credential", "A=b"],
    ["handler", "set", "triage", "--graph", "triage", "--on", "issue.opened"],
    ["handler", "ls"],
    ["handler", "show", "router"],
    ["handler", "rm", "router"],
    ["handler", "init"],
    ["handler", "init", "on-failure"],
  ],
  schedule: [
    ["schedule", "set", "nightly", "n.sh", "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "--credential", "A=b"],
    ["schedule", "ls"],
    ["schedule", "show", "nightly"],
    ["schedule", "rm", "nightly"],
    ["schedule", "pause", "nightly"],
    ["schedule", "resume", "nightly", "-o", "yaml"],
  ],
  agents: [["agents", "ls"]],
  graph: [
    ["graph", "set", "deploy", "deploy.json"],
    ["graph", "ls"],
    ["graph", "show", "deploy"],
    ["graph", "rm", "deploy"],
    ["graph", "requirements", "deploy", "--json"],
  ],
  login: [["login"], ["login", "--url", "http://127.0.0.1:8080", "--token", "t", "--project", "acme/web"]],
};

/** Tokens that are not plain, or hostile: each is tried at every place of each plain call. */
const ODD = [
  "--",
  "-",
  "",
  "-h",
  "--help",
  "help",
  "-V",
  "--version",
  "-Vx",
  "--unknown",
  "--no-follow",
  "--follow=yes",
  "-o",
  "--output=",
  "-oxml",
  "--output=xml",
  "--url",
  "--url=ftp://x",
  "--url=http://127.0.0.1:1",
  "--project=nope",
  "--limit",
  "--limit=1e400",
  "--limit=-1",
  "-5",
  "--env",
  "--env=NOEQ",
  "--env=LD_PRELOAD=/x.so",
  "--retry=0",
  "--as=nope",
  "--payload={",
  "--payload=1e400",
  "a\u0000b",
  "\ud800",
  "--tag=%2e%2e",
  "--token=-x",
];

const variants = (plain: readonly string[]): string[][] => {
  const out: string[][] = [];
  for (const odd of ODD) for (let at = 0; at <= plain.length; at++) out.push([...plain.slice(0, at), odd, ...plain.slice(at)]);
  for (let cut = 0; cut < plain.length; cut++) out.push(plain.slice(0, cut));
  out.push([...plain, "extra"]);
  return out;
};

void test("every CommandSpec's options have a shape fastParse reads (a value `<x>` or a switch, no --no-); each leaf has a plain call here", async () => {
  const specs = await allSpecs();
  assert.deepEqual(specs.map((s) => s.name).sort(), Object.keys(PLAIN).sort());
  const options = [...GLOBAL_OPTIONS, ...specs.flatMap((s) => [s, ...(s.subcommands ?? [])]).flatMap((s) => s.options ?? [])];
  for (const option of options) assert.ok(flagOf(option), option.flags);
  for (const spec of specs) {
    const leaves = spec.subcommands ? spec.subcommands.map((sub) => `${spec.name} ${sub.name}`) : [spec.name];
    const called = new Set(
      (PLAIN[spec.name] ?? []).map((tokens) => {
        const parsed = fastParse(spec, GLOBAL_OPTIONS, tokens);
        return parsed && (spec.subcommands ? `${spec.name} ${parsed.leaf.name}` : spec.name);
      }),
    );
    for (const leaf of leaves) assert.ok(called.has(leaf), `no plain call of \`flow ${leaf}\` in PLAIN`);
  }
});

void test("the plain calls are parsed without commander, exactly as commander parses them", async () => {
  for (const spec of await allSpecs()) {
    for (const tokens of PLAIN[spec.name] ?? []) {
      const fast = fastParse(spec, GLOBAL_OPTIONS, tokens);
      assert.ok(fast, `fastParse left \`flow ${tokens.join(" ")}\` to commander`);
      assert.deepEqual({ leaf: fast.leaf.name, call: fast.call }, await commanderParse(spec, tokens), tokens.join(" "));
    }
  }
});

void test("an odd or hostile argv is either parsed as commander parses it or left to commander", async () => {
  let fast = 0;
  let left = 0;
  for (const spec of await allSpecs()) {
    for (const plain of PLAIN[spec.name] ?? []) {
      for (const tokens of variants(plain)) {
        const parsed = fastParse(spec, GLOBAL_OPTIONS, tokens);
        if (!parsed) {
          left++;
          continue;
        }
        fast++;
        assert.deepEqual({ leaf: parsed.leaf.name, call: parsed.call }, await commanderParse(spec, tokens), JSON.stringify(tokens));
      }
    }
  }
  // Both sides are exercised: an operand such as "" or "a\0b" is plain, a help flag is not.
  assert.ok(fast > 50 && left > 500, `fast ${fast}, left to commander ${left}`);
});

void test("commander still reports what fastParse leaves to it: help, unknown options, bad values, missing arguments", async () => {
  const [status] = (await allSpecs()).filter((s) => s.name === "status");
  assert.ok(status);
  const cases: Array<[string[], string]> = [
    [["status", "r", "--help"], "commander.helpDisplayed"],
    [["status", "r", "--bogus"], "commander.unknownOption"],
    [["status", "r", "-o", "xml"], "commander.invalidArgument"],
    [["status"], "commander.missingArgument"],
    [["status", "a", "b"], "commander.excessArguments"],
    [["status", "r", "--project", "noslash"], "commander.invalidArgument"],
  ];
  for (const [tokens, code] of cases) {
    assert.equal(fastParse(status, GLOBAL_OPTIONS, tokens), undefined, tokens.join(" "));
    assert.deepEqual(await commanderParse(status, tokens), { error: code }, tokens.join(" "));
  }
});

void test("a parser's null is the value on both paths: `--payload null` is JSON null, not commander's \"\"", async () => {
  const specs = await allSpecs();
  for (const tokens of [
    ["emit", "x", "--payload", "null"],
    ["emit", "x", "--payload=null"],
    ["signal", "run-1", "go", "--payload", "null"],
    ["signal", "run-1", "go", "--payload", '"x"', "--payload", "null"],
  ]) {
    const spec = specs.find((s) => s.name === tokens[0]);
    assert.ok(spec);
    const fast = fastParse(spec, GLOBAL_OPTIONS, tokens);
    assert.equal(fast?.call.opts["payload"], null, `fastParse: ${tokens.join(" ")}`);
    const slow = await commanderParse(spec, tokens);
    assert.ok("call" in slow, tokens.join(" "));
    assert.equal(slow.call.opts["payload"], null, `commander: ${tokens.join(" ")}`);
  }
});

void test("a mandatory option left out, a missing required argument or an extra one is commander's to report; a missing optional one takes its default", async () => {
  const specs = await allSpecs();
  const spec = (name: string): CommandSpec => {
    const found = specs.find((s) => s.name === name);
    assert.ok(found, name);
    return found;
  };
  const refused: Array<[string[], string]> = [
    [["rerun", "run-1"], "commander.missingMandatoryOptionValue"],
    [["member", "set", "ann"], "commander.missingMandatoryOptionValue"],
    [["user", "add", "ann"], "commander.missingMandatoryOptionValue"],
    [["token", "rm"], "commander.missingArgument"],
    [["credential", "set", "gh", "--token", "-"], "commander.missingMandatoryOptionValue"],
    [["approve"], "commander.missingArgument"],
    [["approve", "run-1", "gate", "extra"], "commander.excessArguments"],
    [["handler", "init", "router", "extra"], "commander.excessArguments"],
    [["login", "extra"], "commander.excessArguments"],
  ];
  for (const [tokens, code] of refused) {
    assert.equal(fastParse(spec(tokens[0]!), GLOBAL_OPTIONS, tokens), undefined, tokens.join(" "));
    assert.deepEqual(await commanderParse(spec(tokens[0]!), tokens), { error: code }, tokens.join(" "));
  }
  // `[template]` defaults to router on both paths; `[gate]` left out is not passed on.
  assert.deepEqual(fastParse(spec("handler"), GLOBAL_OPTIONS, ["handler", "init"])?.call.args, ["router"]);
  assert.deepEqual(fastParse(spec("approve"), GLOBAL_OPTIONS, ["approve", "run-1"])?.call.args, ["run-1"]);
  // The program's --token is taken wherever it stands, by both: `credential set` reads it from the global flags.
  const set = ["credential", "set", "gh", "--kind", "bearer", "--token", "-"];
  assert.equal(fastParse(spec("credential"), GLOBAL_OPTIONS, set)?.call.flags.token, "-");
  const slow = await commanderParse(spec("credential"), set);
  assert.ok("call" in slow && slow.call.flags.token === "-" && slow.call.opts["token"] === undefined);
});

void test("argumentsOf: the given arguments, then the defaults; undefined when commander must answer", () => {
  const declared = [
    { name: "<a>", description: "" },
    { name: "[b]", description: "" },
    { name: "[c]", description: "", default: "z" },
  ];
  assert.equal(argumentsOf(declared, ["1"]), undefined); // a gap before a default: commander passes [1, undefined, z]
  assert.deepEqual(argumentsOf(declared, ["1", "2"]), ["1", "2", "z"]);
  assert.deepEqual(argumentsOf(declared, ["1", "2", "3"]), ["1", "2", "3"]);
  assert.equal(argumentsOf(declared, []), undefined);
  assert.equal(argumentsOf(declared, ["1", "2", "3", "4"]), undefined);
  assert.deepEqual(argumentsOf(declared.slice(0, 2), ["1"]), ["1"]);
});
