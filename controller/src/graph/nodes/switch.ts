/**
 * The `switch` node: the first case whose CEL `when` is true, else `default` (core's
 * evaluateSwitch: exact CEL, so a routing word inside a sentence does not match `== "deploy"`).
 * Output `{branch}`; dependents read `nodes.<id>.output.branch` in their `if`.
 */
import { evaluateSwitch } from "@flowsvc/core";
import type { NodeExecutor } from "./types.js";

const casesOf = (raw: unknown): Array<{ name: string; when: string }> => {
  if (!Array.isArray(raw)) throw new Error("config.cases: must be an array of {name, when}");
  return raw.map((c: unknown, i) => {
    const { name, when } = (c ?? {}) as { name?: unknown; when?: unknown };
    if (typeof name !== "string" || typeof when !== "string") throw new Error(`config.cases[${i}]: needs a string name and when`);
    return { name, when };
  });
};

export const switchExecutor: NodeExecutor = {
  type: "switch",
  // The raw config: `when` is CEL evaluated here against the scope, not a $expr resolved before.
  start: (ctx) => {
    const raw = ctx.node.config;
    const fallback = typeof raw["default"] === "string" ? raw["default"] : undefined;
    const r = evaluateSwitch(casesOf(raw["cases"]), fallback, ctx.scope);
    return Promise.resolve(r.ok ? { kind: "succeeded", output: { branch: r.branch } } : { kind: "failed", error: r.error });
  },
};
