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

/** The option at args[i]: its name, its value and the index of the last word it used. */
const readOption = (command: InScriptCommand, options: readonly string[], args: readonly string[], i: number): [string, string, number] => {
  const a = args[i] as string;
  for (const o of options) {
    if (a.startsWith(`--${o}=`)) return [o, a.slice(o.length + 3), i];
    if (a !== `--${o}`) continue;
    if (i + 1 < args.length) return [o, args[i + 1] as string, i + 1];
    throw usageError(command, `--${o} needs a value`);
  }
  throw usageError(command, `unknown option ${a}`);
};

export const parseArgs = (command: InScriptCommand, args: readonly string[], spec: ArgSpec): ParsedArgs => {
  const positionals: string[] = [];
  const values = new Map<string, string>();
  const lists = new Map<string, string[]>();
  const options = [...(spec.single ?? []), ...(spec.multi ?? [])];
  const done = (cmd: readonly string[] | undefined): ParsedArgs => ({ positionals, values, lists, cmd });
  let onlyPositionals = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (!onlyPositionals && a === "--") {
      if (spec.takesCommand) return done(args.slice(i + 1));
      onlyPositionals = true;
    } else if (onlyPositionals || !a.startsWith("-") || a.length === 1) {
      if (positionals.length >= spec.maxPositionals) {
        throw usageError(command, `${spec.takesCommand ? "unexpected argument (put the command after --): " : "unexpected argument "}${a}`);
      }
      positionals.push(a);
    } else {
      const [name, value, last] = readOption(command, options, args, i);
      i = last;
      if (spec.multi?.includes(name)) lists.set(name, [...(lists.get(name) ?? []), value]);
      else values.set(name, value);
    }
  }
  return done(undefined);
};
