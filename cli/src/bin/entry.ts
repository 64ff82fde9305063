/**
 * The bundle's entry (scripts/bundle-cli.mjs builds it as cli/dist/bundle/flow.cjs, which
 * cli/bin/flow.js and cli/dist/bin/flow.js require): answers `flow --version` alone, and runs the
 * program from the bundle built for the invoked top-level command (cmd-<name>.cjs: main.ts with
 * only that command's module), else from main.cjs (every command: help, completion, in-script
 * calls, an unknown name). A command then compiles its own code and commander, not every other
 * command's (issue 15: start-up). Only meaningful inside the bundle directory.
 *
 * A command's bundle is compiled with the V8 code cache the build wrote beside it (cmd-<name>.cjs.v8cache,
 * see scripts/cli-code-cache.cjs): V8 then deserializes the functions the command runs instead of
 * compiling them (~5 ms of a ~20 ms start-up above `node -e 0`). One V8 rejects (another Node version
 * or V8 flags: `cachedDataRejected`) costs nothing but that time: the source is compiled as without it.
 * In a vm.Script, import() needs Node 20's experimental USE_MAIN_CONTEXT_DEFAULT_LOADER (a warning on
 * stderr), so a bundle runs from its cache only where it imports nothing: the build writes none for a
 * bundle with an import() of its own (of the server, the local engine, core's zod models: `flow
 * server`, `run`, `check`, main.cjs), and an invocation that may be an in-script call (main.ts then
 * imports the in-script client) or a `flow signal` to a local run (signal.ts then imports the local
 * engine) requires the bundle as before.
 */
import { existsSync, readFileSync } from "node:fs";
import { Module, createRequire, wrap } from "node:module";
import { dirname, join } from "node:path";
import { Script } from "node:vm";
import { mayBeInScript, topCommandOf } from "../commands/route.js";
import { processEnvironment } from "../config.js";
import { mayBeLocalRun } from "../local-state-dir.js";
import { cliVersion } from "../version.js";

/** What node:module's wrap() makes of a CommonJS file: the function require() calls. */
type CommonJsWrapper = (...args: [exports: unknown, require: NodeJS.Require, module: Module, filename: string, dirname: string]) => void;

const argv = process.argv;

const readCache = (file: string): Buffer | undefined => {
  try {
    return readFileSync(`${file}.v8cache`);
  } catch {
    return undefined;
  }
};

/** Runs a CommonJS bundle as `require` would, compiled with its code cache when the build wrote one. */
/**
 * Whether this invocation may reach an import() of its bundle: an in-script call (the in-script
 * client), or a `flow signal` naming a local run (the local engine; a run id whose directory exists).
 */
const mayImport = (top: string | undefined): boolean => {
  const env = processEnvironment();
  return mayBeInScript(argv, env) || (top === "signal" && argv.slice(3).some((arg) => mayBeLocalRun(arg, env)));
};

const runBundle = (file: string, top: string | undefined): void => {
  const cachedData = mayImport(top) ? undefined : readCache(file);
  if (cachedData === undefined) {
    createRequire(file)(file);
    return;
  }
  const script = new Script(wrap(readFileSync(file, "utf8")), { filename: file, cachedData });
  const require = createRequire(file);
  // Recorded in require's cache as a required file is (a later require of it finds it; import-recorder.ts lists it).
  const module = new Module(file);
  module.filename = file;
  require.cache[file] = module;
  (script.runInThisContext() as CommonJsWrapper)(module.exports, require, module, file, dirname(file));
  module.loaded = true;
};

if (argv.length === 3 && (argv[2] === "--version" || argv[2] === "-V")) {
  process.stdout.write(`${cliVersion()}\n`);
} else {
  const top = topCommandOf(argv);
  // __dirname, not import.meta.url: this file runs only as the CommonJS bundle, and a file URL costs ~1 ms to make.
  const own = top !== undefined && /^[a-z][a-z-]*$/.test(top) ? join(__dirname, `cmd-${top}.cjs`) : undefined;
  runBundle(own !== undefined && existsSync(own) ? own : join(__dirname, "main.cjs"), top);
}
