import { FlowError } from "./errors.js";

/**
 * Which program runs a submitted script (spec, Versioning: "Interpreter defaults"). `flow submit`
 * picks by the file's extension; `--interpreter` overrides it, split on whitespace. The runtime
 * must exist on the agent host: nothing here checks that.
 */

const BY_EXTENSION: Readonly<Record<string, readonly string[]>> = {
  ".py": ["python3"],
  ".ts": ["bun", "run"],
  ".js": ["node"],
  ".mjs": ["node"],
  ".go": ["go", "run"],
};
const DEFAULT_INTERPRETER: readonly string[] = ["bash", "-eu"];

/** The extension of the file's base name, lower-cased; "" for none (`run`, `.profile`, `dir.d/run`). */
const extensionOf = (filename: string): string => {
  const base = filename.slice(Math.max(filename.lastIndexOf("/"), filename.lastIndexOf("\\")) + 1);
  const dot = base.lastIndexOf(".");
  return dot > 0 ? base.slice(dot).toLowerCase() : "";
};

/**
 * The command (program and leading arguments) that runs `filename`: `.py` python3, `.ts` bun run,
 * `.js`/`.mjs` node, `.go` go run, anything else bash -eu. The extension is matched without regard
 * to case. A given `override` wins; it must name at least a program.
 */
export const pickInterpreter = (filename: string, override?: string): string[] => {
  if (override !== undefined) {
    const words = override.split(/\s+/).filter((w) => w !== "");
    if (words.length === 0) {
      throw new FlowError(
        "invalid_argument",
        `--interpreter is empty: give the program that runs ${JSON.stringify(filename)}, e.g. --interpreter "python3 -u"`,
      );
    }
    return words;
  }
  return [...(BY_EXTENSION[extensionOf(filename)] ?? DEFAULT_INTERPRETER)];
};

const INSTALL_HINTS: Readonly<Record<string, string>> = {
  bun: "bun runs .ts scripts: install it on the agent host with `npm install -g bun` (the npm package bun ships the binary), or submit with --interpreter",
  go: "go runs .go scripts (`go run`): install Go on the agent host (Debian: apt-get install golang-go), or submit with --interpreter",
  python3: "python3 runs .py scripts: install Python 3 on the agent host (Debian: apt-get install python3), or submit with --interpreter",
  node: "node runs .js and .mjs scripts: install Node.js on the agent host, or submit with --interpreter",
};

/**
 * What to do when a script's runtime is not on the agent host (spec: "The runtime must exist on
 * the agent host"): how to install the default runtimes (`bun` ships in the npm package `bun`),
 * else to install the program or pick another with --interpreter.
 */
export const missingInterpreterHint = (program: string): string => {
  const name = program.slice(program.lastIndexOf("/") + 1);
  return INSTALL_HINTS[name] ?? `install ${JSON.stringify(program)} on the agent host, or submit with --interpreter`;
};
