/**
 * The words of an in-script command, parsed exactly as the native client's parse_args does
 * (agent-image/native/flow.c): options `--<name> <value>` or `--<name>=<value>`, positionals,
 * and either the words after `--` (a command to run) or `--` as the end of the options.
 * `flow step` keeps its own parser (step.ts).
 */
import { usageError } from "./command-kit.js";
import type { InScriptCommand } from "./command-kit.js";

export interface ArgSpec {
  /** Options with one value; the last one given wins. */
  readonly single?: readonly string[];
  /** Options that may repeat; every value is kept, in order. */
  readonly multi?: readonly string[];
  readonly maxPositionals: number;
  /** The command ends with `-- <cmd...>`. */
  readonly takesCommand?: boolean;
}

export interface ParsedArgs {
  readonly positionals: readonly string[];
  readonly values: ReadonlyMap<string, string>;
  readonly lists: ReadonlyMap<string, readonly string[]>;
  /** The words after `--` when the command takes one and `--` was given. */
  readonly cmd: readonly string[] | undefined;
}

/** What parseArgs collects, with what it needs to check a word. */
interface Parsing {
  readonly command: InScriptCommand;
  readonly spec: ArgSpec;
  readonly positionals: string[];
  readonly values: Map<string, string>;
  readonly lists: Map<string, string[]>;
}

/** The option at args[i]: its name, its value and the index of the last word it used. */
const readOption = (p: Parsing, args: readonly string[], i: number): [string, string, number] => {
  const a = args[i] as string;
  for (const o of [...(p.spec.single ?? []), ...(p.spec.multi ?? [])]) {
    if (a.startsWith(`--${o}=`)) return [o, a.slice(o.length + 3), i];
    if (a !== `--${o}`) continue;
    if (i + 1 < args.length) return [o, args[i + 1] as string, i + 1];
    throw usageError(p.command, `--${o} needs a value`);
  }
  throw usageError(p.command, `unknown option ${a}`);
};

/** Takes the option at args[i]; returns the index of the last word it used. */
const takeOption = (p: Parsing, args: readonly string[], i: number): number => {
  const [name, value, last] = readOption(p, args, i);
  if (p.spec.multi?.includes(name)) p.lists.set(name, [...(p.lists.get(name) ?? []), value]);
  else p.values.set(name, value);
  return last;
};

const takePositional = (p: Parsing, word: string): void => {
  if (p.positionals.length >= p.spec.maxPositionals) {
    throw usageError(
      p.command,
      `${p.spec.takesCommand ? "unexpected argument (put the command after --): " : "unexpected argument "}${word}`,
    );
  }
  p.positionals.push(word);
};

const isOption = (word: string): boolean => word.startsWith("-") && word.length > 1;

export const parseArgs = (command: InScriptCommand, args: readonly string[], spec: ArgSpec): ParsedArgs => {
  const p: Parsing = { command, spec, positionals: [], values: new Map(), lists: new Map() };
  const done = (cmd: readonly string[] | undefined): ParsedArgs => ({ positionals: p.positionals, values: p.values, lists: p.lists, cmd });
  let onlyPositionals = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (!onlyPositionals && a === "--") {
      if (spec.takesCommand) return done(args.slice(i + 1));
      onlyPositionals = true;
    } else if (onlyPositionals || !isOption(a)) takePositional(p, a);
    else i = takeOption(p, args, i);
  }
  return done(undefined);
};
