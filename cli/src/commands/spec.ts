/**
 * The user commands' one description (issue 15: start-up): every command that sends a request
 * (status, runs, submit, follow, steps, signal, emit, approve, rerun, cancel, secret, credential,
 * account, member, events, event-hook, handler, schedule, agents, graph, login) is a CommandSpec, a
 * table of its arguments (optional ones with their default), options (mandatory ones marked), help
 * text and action, without commander. The same table builds its commander command
 * (spec-commander.ts: help, completion, every error) and is read here by fastParse, which parses an
 * argv without loading commander, but only an argv whose meaning is plain: every flag known and
 * spelled out, every value present and valid, the arguments counted. Anything else (a help flag, an
 * unknown or grouped flag, `--`, a value that starts with `-` but for `-`, a bad value, a missing
 * mandatory option, a missing or extra argument) answers undefined and the invocation goes to commander, which parses it and prints its
 * help or its error exactly as before. So fastParse never decides anything commander would answer
 * differently (spec.test.ts runs both on the same argvs).
 */
import type { SettingFlags } from "../config.js";
import type { CommandDeps } from "./context.js";

/** One option, in commander's words: `-o, --output <format>` (a value) or `--follow` (a switch). */
export interface OptionSpec {
  readonly flags: string;
  readonly description: string;
  /** The values allowed (commander's Option.choices). */
  readonly choices?: readonly string[];
  /** commander's argParser: the value from the text and the previous value (repeatable options); throws InvalidArgumentError. */
  parse?(value: string, previous: unknown): unknown;
  /** commander's makeOptionMandatory: a call without it is commander's to refuse (`required option ... not specified`). */
  readonly mandatory?: boolean;
}

/** One positional argument: `<run>` (required) or `[gate]` (optional, with its default when it has one). */
export interface ArgumentSpec {
  readonly name: string;
  readonly description: string;
  /** An optional argument's value when it is not given (commander shows it in the help: `(default: "router")`). */
  readonly default?: string;
}

/** What an action gets: the arguments, the command's own options (by commander's attribute names) and the global flags. */
export interface Invocation {
  readonly args: readonly string[];
  readonly opts: Readonly<Record<string, unknown>>;
  readonly flags: SettingFlags;
}

export interface CommandSpec {
  readonly name: string;
  readonly aliases?: readonly string[];
  readonly description: string;
  readonly arguments?: readonly ArgumentSpec[];
  readonly options?: readonly OptionSpec[];
  /** `$ flow ...` lines of the help's Examples. */
  readonly examples?: readonly string[];
  /** Help text printed before the Examples (a paragraph starting with "\n") and after them. */
  readonly helpBefore?: string;
  readonly helpAfter?: string;
  readonly subcommands?: readonly CommandSpec[];
  /** A leaf's action; a command with subcommands has none. */
  action?(deps: CommandDeps, call: Invocation): Promise<void>;
}

/** What a top-level command module exports for program.ts's table: a spec, or a commander factory (commands.ts). */
export const isCommandSpec = (value: unknown): value is CommandSpec =>
  typeof value === "object" && value !== null && typeof (value as CommandSpec).name === "string";

/** The flags of an option as fastParse reads them; undefined for a shape it leaves to commander (`[value]`, `--no-x`, variadic). */
interface Flag {
  readonly spec: OptionSpec;
  readonly short: string | undefined;
  readonly long: string;
  readonly takesValue: boolean;
  /** commander's attributeName: the long name in camelCase (`--idempotency-key` is idempotencyKey). */
  readonly key: string;
}

/** `-o, --output <format>` or `--follow`; commander reads `<...>` as a required value even with `[` inside (`<attempts[,backoff]>`). */
const FLAGS = /^(?:(-[A-Za-z]), )?--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)( <[^<>]+>)?$/;

export const flagOf = (spec: OptionSpec): Flag | undefined => {
  const m = FLAGS.exec(spec.flags);
  if (!m || m[2]!.startsWith("no-") || spec.flags.endsWith("...>")) return undefined;
  const name = m[2]!;
  return {
    spec,
    short: m[1],
    long: `--${name}`,
    takesValue: m[3] !== undefined,
    key: name.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase()),
  };
};

/** How one token reads: an option with its value (and where the next token is), an operand, or not plain (commander decides). */
type Step = { readonly flag: Flag; readonly value: string | undefined; readonly next: number } | "operand" | "unknown" | "fallback";

/** Reads tokens[i] against `flags` as commander's parseOptions would for the plain spellings (exact flag, `--long=value`, `-ovalue`). */
const stepAt = (flags: readonly Flag[], tokens: readonly string[], i: number): Step => {
  const token = tokens[i]!;
  if (token === "--") return "fallback";
  if (token.length < 2 || !token.startsWith("-")) return "operand";
  const exact = flags.find((f) => f.long === token || f.short === token);
  if (exact) {
    if (!exact.takesValue) return { flag: exact, value: undefined, next: i + 1 };
    // commander takes the next token whatever it is; "-" (read stdin) is plain, anything else starting with `-` is left to it.
    const value = tokens[i + 1];
    return value === undefined || (value.startsWith("-") && value !== "-") ? "fallback" : { flag: exact, value, next: i + 2 };
  }
  return joinedAt(flags, token, i);
};

/** `--long=value` or `-ovalue`: a value option with its value in the same token. */
const joinedAt = (flags: readonly Flag[], token: string, i: number): Step => {
  const eq = token.indexOf("=");
  const long = token.startsWith("--");
  const flag = long ? eq > 2 && flags.find((f) => f.long === token.slice(0, eq)) : flags.find((f) => f.short === token.slice(0, 2));
  if (!flag) return "unknown";
  if (!flag.takesValue) return "fallback";
  return { flag, value: long ? token.slice(eq + 1) : token.slice(2), next: i + 1 };
};

/** The option's value after this occurrence (choices checked, parser run), or undefined when commander must report it. */
const valueOf = (flag: Flag, text: string | undefined, previous: unknown): { value: unknown } | undefined => {
  if (text === undefined) return { value: true };
  if (flag.spec.choices && !flag.spec.choices.includes(text)) return undefined;
  if (!flag.spec.parse) return { value: text };
  try {
    // A parser's null is the value (`--payload null` is JSON null; spec-commander.ts keeps it so on
    // commander's path too); undefined is "", as commander stores it.
    const value = flag.spec.parse(text, previous);
    return { value: value === undefined ? "" : value };
  } catch {
    return undefined;
  }
};

/** The program's options, for fastParse: `-V`, `--version` and `-h`/`--help` are left to commander (not listed: unknown). */
const takeGlobals = (
  globals: readonly Flag[],
  tokens: readonly string[],
): { rest: string[]; flags: Record<string, unknown> } | undefined => {
  const rest: string[] = [];
  const flags: Record<string, unknown> = {};
  for (let i = 0; i < tokens.length;) {
    const token = tokens[i]!;
    if (token.startsWith("-V") || token === "--version") return undefined;
    const step = stepAt(globals, tokens, i);
    if (step === "fallback") return undefined;
    if (step === "operand" || step === "unknown") {
      rest.push(token);
      i++;
      continue;
    }
    const parsed = valueOf(step.flag, step.value, flags[step.flag.key]);
    if (!parsed) return undefined;
    flags[step.flag.key] = parsed.value;
    i = step.next;
  }
  return { rest, flags };
};

/** The leaf's options as fastParse reads them, or undefined when one has a shape it leaves to commander. */
const flagsOfLeaf = (leaf: CommandSpec): Flag[] | undefined => {
  const flags: Flag[] = [];
  for (const option of leaf.options ?? []) {
    const flag = flagOf(option);
    if (!flag) return undefined;
    flags.push(flag);
  }
  return flags;
};

/**
 * The action's arguments as commander hands them on: those given, then each missing optional one's
 * default (trailing missing ones without a default left out, as commanderFrom does); undefined when
 * commander must answer (a required one missing, one too many, a gap before a default).
 */
export const argumentsOf = (declared: readonly ArgumentSpec[], given: readonly string[]): string[] | undefined => {
  if (given.length > declared.length) return undefined;
  const values: Array<string | undefined> = declared.map((arg, i) => (i < given.length ? given[i] : arg.default));
  if (declared.some((arg, i) => i >= given.length && arg.name.startsWith("<"))) return undefined;
  while (values.length > 0 && values[values.length - 1] === undefined) values.pop();
  return values.every((v) => v !== undefined) ? values : undefined;
};

/** A leaf's arguments and options from its tokens, or undefined when one is not plain. */
const parseLeaf = (leaf: CommandSpec, tokens: readonly string[]): { args: string[]; opts: Record<string, unknown> } | undefined => {
  const flags = flagsOfLeaf(leaf);
  if (!flags) return undefined;
  const operands: string[] = [];
  const opts: Record<string, unknown> = {};
  for (let i = 0; i < tokens.length;) {
    const step = stepAt(flags, tokens, i);
    if (step === "fallback" || step === "unknown") return undefined;
    if (step === "operand") {
      operands.push(tokens[i]!);
      i++;
      continue;
    }
    const parsed = valueOf(step.flag, step.value, opts[step.flag.key]);
    if (!parsed) return undefined;
    opts[step.flag.key] = parsed.value;
    i = step.next;
  }
  // A mandatory option left out is commander's to report.
  if (flags.some((f) => f.spec.mandatory && opts[f.key] === undefined)) return undefined;
  const args = argumentsOf(leaf.arguments ?? [], operands);
  return args && { args, opts };
};

/**
 * The leaf command and its invocation when `tokens` (argv past node and the script) is a plain call
 * of `top` (see above); undefined hands the argv to commander. `globals` are the program's options.
 */
export const fastParse = (
  top: CommandSpec,
  globals: readonly OptionSpec[],
  tokens: readonly string[],
): { leaf: CommandSpec; call: Invocation } | undefined => {
  const globalFlags = globals.map(flagOf);
  if (globalFlags.some((f) => f === undefined)) return undefined;
  const taken = takeGlobals(globalFlags as Flag[], tokens);
  if (!taken || taken.rest[0] !== top.name) return undefined;
  let leaf = top;
  let at = 1;
  if (top.subcommands) {
    const name = taken.rest[1];
    const sub = top.subcommands.find((c) => c.name === name || c.aliases?.includes(name ?? ""));
    if (!sub || sub.subcommands) return undefined;
    leaf = sub;
    at = 2;
  }
  if (!leaf.action) return undefined;
  const parsed = parseLeaf(leaf, taken.rest.slice(at));
  if (!parsed) return undefined;
  const { url, token, project } = taken.flags as SettingFlags;
  return { leaf, call: { args: parsed.args, opts: parsed.opts, flags: { url, token, project } } };
};
