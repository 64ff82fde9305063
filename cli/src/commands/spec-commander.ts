/**
 * A CommandSpec (spec.ts) as a commander command: the same arguments, options, help text and action,
 * so `--help`, completion and every usage error of a hot command come from commander as they did
 * when the command was written with commander's calls, and fastParse reads the same table.
 */
import { Command, Option } from "commander";
import type { CommandDeps } from "./context.js";
import { flagsOf } from "./context.js";
import { examples } from "./parsers.js";
import type { CommandSpec, Invocation, OptionSpec } from "./spec.js";

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
  if (spec.parse) option.argParser((value: string, previous: unknown) => spec.parse?.(value, unboxed(previous)) ?? NULL_VALUE);
  return option;
};

/** The options commander parsed, a parser's null restored. */
const optionsOf = (opts: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(opts).map(([key, value]) => [key, unboxed(value)]));

export const commanderFrom = (spec: CommandSpec, deps: CommandDeps, run?: RunLeaf): Command => {
  const cmd = new Command(spec.name);
  for (const alias of spec.aliases ?? []) cmd.alias(alias);
  cmd.description(spec.description);
  for (const arg of spec.arguments ?? []) cmd.argument(arg.name, arg.description);
  for (const option of spec.options ?? []) cmd.addOption(optionFrom(option));
  for (const sub of spec.subcommands ?? []) cmd.addCommand(commanderFrom(sub, deps, run));
  if (spec.examples) cmd.addHelpText("after", examples(...spec.examples));
  const runLeaf = run ?? ((leaf: CommandSpec, call: Invocation) => leaf.action?.(deps, call) ?? Promise.resolve());
  if (spec.action) {
    cmd.action(async (...params: unknown[]) => {
      const self = params[params.length - 1] as Command;
      const opts = params[params.length - 2] as Record<string, unknown>;
      await runLeaf(spec, { args: params.slice(0, -2) as string[], opts: optionsOf(opts), flags: flagsOf(self) });
    });
  }
  return cmd;
};
