/**
 * A CommandSpec (spec.ts) as a commander command: the same arguments, options, help text and action,
 * so `--help`, completion and every usage error of a CommandSpec's command come from commander as they did
 * when the command was written with commander's calls, and fastParse reads the same table.
 */
import { Argument, Command, Option } from "commander";
import type { CommandDeps } from "./context.js";
import { flagsOf } from "./context.js";
import { examples } from "./parsers.js";
import type { ArgumentSpec, CommandSpec, Invocation, OptionSpec } from "./spec.js";

/** What a parsed leaf does: its own action by default (spec.test.ts passes one that records the invocation). */
export type RunLeaf = (leaf: CommandSpec, call: Invocation) => Promise<void>;

/**
 * commander stores a parser's null as "" (its parseArg's null means "no value"): a parser's null goes
 * through commander as this box, and the action gets null back (`--payload null` is JSON null).
 */
const NULL_VALUE: unique symbol = Symbol("null");
const unboxed = (value: unknown): unknown => (value === NULL_VALUE ? null : value);

export const optionFrom = (spec: OptionSpec): Option => {
  const option = new Option(spec.flags, spec.description);
  if (spec.choices) option.choices(spec.choices);
  if (spec.mandatory) option.makeOptionMandatory();
  if (spec.parse) option.argParser((value: string, previous: unknown) => spec.parse?.(value, unboxed(previous)) ?? NULL_VALUE);
  return option;
};

/** The options commander parsed, a parser's null restored. */
const optionsOf = (opts: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(opts).map(([key, value]) => [key, unboxed(value)]));

/** An optional argument's default shows in the help: `(default: "router")`. */
const argumentFrom = (spec: ArgumentSpec): Argument => {
  const argument = new Argument(spec.name, spec.description);
  if (spec.default !== undefined) argument.default(spec.default);
  return argument;
};

/** The help text after the options: a paragraph, the Examples, a paragraph (each optional). */
const helpTextOf = (spec: CommandSpec): string =>
  `${spec.helpBefore ?? ""}${spec.examples ? examples(...spec.examples) : ""}${spec.helpAfter ?? ""}`;

/** The leaf's action as commander calls it: (...arguments, options, command). */
const actionOf =
  (spec: CommandSpec, runLeaf: RunLeaf) =>
  async (...params: unknown[]): Promise<void> => {
    const self = params[params.length - 1] as Command;
    const opts = params[params.length - 2] as Record<string, unknown>;
    // An optional argument left out (and without a default) is not passed on: fastParse's argumentsOf answers the same.
    const args = params.slice(0, -2);
    while (args.length > 0 && args[args.length - 1] === undefined) args.pop();
    await runLeaf(spec, { args: args as string[], opts: optionsOf(opts), flags: flagsOf(self) });
  };

export const commanderFrom = (spec: CommandSpec, deps: CommandDeps, run?: RunLeaf): Command => {
  const cmd = new Command(spec.name);
  for (const alias of spec.aliases ?? []) cmd.alias(alias);
  cmd.description(spec.description);
  for (const arg of spec.arguments ?? []) cmd.addArgument(argumentFrom(arg));
  for (const option of spec.options ?? []) cmd.addOption(optionFrom(option));
  for (const sub of spec.subcommands ?? []) cmd.addCommand(commanderFrom(sub, deps, run));
  const help = helpTextOf(spec);
  if (help !== "") cmd.addHelpText("after", help);
  if (spec.action) cmd.action(actionOf(spec, run ?? ((leaf, call) => leaf.action?.(deps, call) ?? Promise.resolve())));
  return cmd;
};
