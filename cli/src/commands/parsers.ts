/**
 * Parsers and shared option descriptions of the commands, without commander: the CommandSpec commands
 * (spec.ts) parse their argv from these without loading it (issue 15: start-up). A parser throws
 * InvalidArgumentError below, which commander reports naming the flag exactly as its own (it reads
 * the error's `code` and `exitCode`, commander.invalidArgument and 1); program.ts turns that into a
 * usage error (exit 2).
 */
import { FlowError } from "@flowsvc/core/errors";
import { parseDuration } from "@flowsvc/core/duration";
import { findJsonProblem } from "@flowsvc/core/json-guard";
import { envVariableProblem } from "@flowsvc/core/secret-rules";
import { PROJECT_REF_PATTERN, httpUrlProblem } from "../config.js";
import { OUTPUT_FORMATS } from "../print-format.js";
import type { OutputFormat } from "../print-format.js";
import type { OptionSpec } from "./spec.js";

/** A bad flag or argument value; commander prints `error: option '<flags>' argument '<value>' is invalid. <message>`. */
export class InvalidArgumentError extends Error {
  /** What commander's parse reads to report it as one of its own (commander's InvalidArgumentError has the same). */
  readonly code = "commander.invalidArgument";
  readonly exitCode = 1;
  constructor(message: string) {
    super(message);
    this.name = "InvalidArgumentError";
  }
}

/** `NAME=VALUE` split at the first `=`; the value may be empty or contain `=`; the name is checked by the caller. */
const splitAssignment = (text: string): [string, string] => {
  const eq = text.indexOf("=");
  if (eq < 0) throw new InvalidArgumentError("expected NAME=VALUE.");
  return [text.slice(0, eq), text.slice(eq + 1)];
};

/**
 * `--env NAME=VALUE`: the name by core's one rule for a run's environment (envVariableProblem:
 * `FLOW_*`, `LD_PRELOAD`, `PATH`... refused), with the message the API would answer, before any
 * request is sent.
 */
export const parseEnvAssignment = (text: string): [string, string] => {
  const [name, value] = splitAssignment(text);
  const problem = envVariableProblem(name);
  if (problem !== undefined) throw new InvalidArgumentError(`${problem}.`);
  return [name, value];
};

/** Repeatable `--env NAME=VALUE`: the last value of a name wins. */
export const collectEnv = (text: string, previous: Record<string, string> | undefined): Record<string, string> => {
  const [name, value] = parseEnvAssignment(text);
  return { ...previous, [name]: value };
};

/** Repeatable `ENV=name` (`--credential`): split only; the server checks both sides by the credential rule. */
export const collectAssignment = (text: string, previous: Record<string, string> | undefined): Record<string, string> => {
  const [name, value] = splitAssignment(text);
  return { ...previous, [name]: value };
};

/** Repeatable flag collected into a list. */
export const collectList = (text: string, previous: string[] | undefined): string[] => [...(previous ?? []), text];

export const parsePositiveInt = (text: string): number => {
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new InvalidArgumentError("expected a whole number of at least 1.");
  return Number(text);
};

export const parseUrlFlag = (text: string): string => {
  const problem = httpUrlProblem(text);
  // Not commander's report, which quotes the value: a URL's password must not be printed back.
  if (problem !== undefined) throw new FlowError("invalid_argument", `--url ${problem}`, { hint: "see `flow --help`" });
  return text.replace(/\/+$/, "");
};

export const parseProjectFlag = (text: string): string => {
  if (!PROJECT_REF_PATTERN.test(text)) throw new InvalidArgumentError("expected org/project.");
  return text;
};

/**
 * What in parsed JSON the API would refuse, as a phrase naming its place (`n is a number outside
 * ...`, `a.b holds a NUL ...`), or undefined: core's json-guard, the server's own rule, so the CLI
 * refuses before sending. It matters most for what JSON.stringify would change: `1e400` parses to
 * Infinity, sent as null (the user's value silently replaced), and nesting past the guard's limit
 * overflows the stringify.
 */
export const jsonValueProblem = (value: unknown): string | undefined => {
  const found = findJsonProblem(value, "$");
  if (found === undefined) return undefined;
  const path = found.path.slice(1).replace(/^\./, "");
  // A path 128 levels deep is mostly `[0][0]...`: show its start (as the server's refusal does).
  const at = path.length > 100 ? `${path.slice(0, 80).replace(/[.[][^.[]*$/, "")}...` : path;
  return at === "" ? `the value ${found.problem}` : `${at} ${found.problem}`;
};

/** A flag's JSON text as a value, or why it is not one (not JSON, or jsonValueProblem's phrase). */
export const jsonFlagProblem = (text: string): { value: unknown } | { problem: string } => {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    return { problem: `not valid JSON (${(err as Error).message})` };
  }
  const problem = jsonValueProblem(value);
  return problem === undefined ? { value } : { problem };
};

export const parseJsonFlag = (text: string): unknown => {
  const r = jsonFlagProblem(text);
  if ("problem" in r) throw new InvalidArgumentError(`${r.problem}.`);
  return r.value;
};

/** `--interpreter "python3 -u"` is `["python3", "-u"]`. */
export const splitInterpreter = (text: string): string[] => {
  const words = text.split(/\s+/).filter((w) => w !== "");
  if (words.length === 0)
    throw new FlowError("invalid_argument", "--interpreter is empty", {
      hint: 'give the command that runs the file, e.g. --interpreter "python3 -u"',
    });
  return words;
};

/** `-o json|yaml` on every list, show and status command; the default is a table for people. */
export const OUTPUT_OPTION: OptionSpec = {
  flags: "-o, --output <format>",
  description: "print one JSON or YAML document instead of a table",
  choices: OUTPUT_FORMATS,
};

/** The program's options (program.ts; fastParse reads them past any command). */
export const GLOBAL_OPTIONS: readonly OptionSpec[] = [
  {
    flags: "--url <url>",
    description: "the flowsvc API (env FLOWSVC_URL, else the saved config, else http://127.0.0.1:8080)",
    parse: parseUrlFlag,
  },
  { flags: "--token <token>", description: "API token (env FLOWSVC_TOKEN, else the saved config)" },
  {
    flags: "--project <org/project>",
    description: "the project to act on (env FLOWSVC_PROJECT, else the saved config, else default/default)",
    parse: parseProjectFlag,
  },
];

export const formatOf = (opts: { output?: string }): OutputFormat =>
  opts.output === "json" || opts.output === "yaml" ? opts.output : "table";

/** Help text shown after a command's options: `Examples:` and one `$ flow ...` line each. */
export const examples = (...lines: string[]): string => `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;

/**
 * `--retry <attempts>[,<backoff>]`: at most <attempts> attempts in all (the first included),
 * <backoff> (humantime, default 0s) apart.
 */
export const parseRetryFlag = (text: string): { attempts: number; backoff_ms: number } => {
  const m = /^(\d+)(?:,(.+))?$/.exec(text.trim());
  const attempts = m ? Number(m[1]) : NaN;
  if (!m || !Number.isInteger(attempts) || attempts < 1 || attempts > 100) {
    throw new InvalidArgumentError(`takes <attempts>[,<backoff>], e.g. 3 or 3,30s (attempts 1-100), not "${text}"`);
  }
  try {
    return { attempts, backoff_ms: m[2] === undefined ? 0 : parseDuration(m[2]) };
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
};
