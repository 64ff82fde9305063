#!/usr/bin/env node
// Bundles the user CLI (cli/src/bin/main.ts and the client modules it imports) into CommonJS files
// in cli/dist/bundle/, run by `npm run build` after tsc: flow.cjs (cli/src/bin/entry.ts: answers
// `flow --version` and picks the next file), cmd-<name>.cjs for each command of table.ts's table
// (main.ts with that command's module only) and main.cjs (every command: help, completion, in-script
// calls). cli/bin/flow.js (the `flow` that npm links) and cli/dist/bin/flow.js require flow.cjs.
//
// Why (issue 15: every user command reaches its first request within 1.5x `node -e 0`): Node 20's
// ES module loader costs about 0.5 ms per module (resolve, URL conversions, link) and a few ms just
// to start, where CommonJS loads one file synchronously; an ESM bundle split per command still
// loaded ~15 modules. And a command compiles only its own bundle (~85 KB, commander being 56 KB of
// it), not main.cjs's 190 KB of every command. What else start-up
// no longer pays: commander's node:child_process (for executable subcommands we never use; it also
// loads dgram) is required when first used, and an `await import("node:http")` becomes a require,
// so no ES module is loaded at all on a user command's path.
// Then each bundle gets a V8 code cache written at build time (below; measured on a quiet host: a
// command's first request went from ~1.6x to ~1.35x `node -e 0`, the compile of the bundle's functions
// being most of what was left above Node's own start).
//
// What is bundled: cli/src, except the server and the local engine (cli/src/server/**, but for the
// `flow server` definition in command.ts, and cli/src/local/**); commander; and core's zod-free
// subpaths (BUNDLED_CORE). Everything else stays external and is loaded at run time from where tsc
// and npm put it: the server and local engine from cli/dist (import()), and every other package
// (core's graph and pipeline models, zod, yaml, the agent's in-script client, ...) from node_modules.
// core's errors are thus loaded twice when a command also loads the server or core's zod models:
// FlowError's instanceof checks a brand (core/src/errors.ts), so either copy's errors are FlowErrors.
// The module list test (cli/src/bin/flow-imports.test.ts) relies on the externals: a client command
// that loaded a server module would resolve it at run time, where the test sees it.
// Whitespace and syntax are minified, names kept; a source map is written beside the file (node
// --enable-source-maps maps a stack trace back to cli/src).
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "cli", "src");
const outdir = join(root, "cli", "dist", "bundle");
const BUNDLED_PACKAGES = new Set(["commander"]);
/** core's subpaths without zod that client commands import (core/package.json's exports). */
const BUNDLED_CORE = new Set(
  ["errors", "json-guard", "duration", "run-status", "events", "secret-rules", "credentials", "graph/approval-fields", "members"].map(
    (p) => `@flowsvc/core/${p}`,
  ),
);
/** A module whose exports load `node:<name>` on first use: commander requires child_process at its top. */
const LAZY_BUILTIN = "flowsvc-lazy-builtin";
const SERVER_DEFINITION = join(src, "server", "command.ts");

const isLoadedFromDist = (file) =>
  (file.startsWith(join(src, "server") + sep) && file !== SERVER_DEFINITION) || file.startsWith(join(src, "local") + sep);

/**
 * The server and the local engine stay in tsc's output: an import of one is rewritten to its cli/dist
 * file. Packages stay external but for commander and BUNDLED_CORE. A builtin is required (a dynamic
 * import() of one would start the ES module loader), and commander's child_process lazily.
 */
const externals = {
  name: "flowsvc-externals",
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, (args) => {
      const file = resolve(args.resolveDir, args.path).replace(/\.js$/, ".ts");
      if (!isLoadedFromDist(file)) return undefined;
      const distFile = join(root, "cli", "dist", relative(src, file)).replace(/\.ts$/, ".js");
      return { path: relative(outdir, distFile).split(sep).join("/"), external: true };
    });
    b.onResolve({ filter: /^node:/ }, (args) => {
      if (args.path === "node:child_process" && args.importer.includes(`${sep}node_modules${sep}commander${sep}`)) {
        return { path: args.path, namespace: LAZY_BUILTIN };
      }
      return args.kind === "dynamic-import" ? { path: args.path, namespace: "flowsvc-builtin" } : { path: args.path, external: true };
    });
    b.onLoad({ filter: /.*/, namespace: LAZY_BUILTIN }, (args) => ({
      contents: `let m; module.exports = new Proxy({}, { get: (_, key) => (m ??= require(${JSON.stringify(args.path)}))[key] });`,
      loader: "js",
    }));
    b.onLoad({ filter: /.*/, namespace: "flowsvc-builtin" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (BUNDLED_CORE.has(args.path)) return undefined;
      const name = args.path.startsWith("@") ? args.path.split("/").slice(0, 2).join("/") : args.path.split("/")[0];
      return BUNDLED_PACKAGES.has(name) ? undefined : { path: args.path, external: true };
    });
  },
};

// Built beside and swapped in, so a `flow` started meanwhile finds the old bundle or none (then
// cli/dist/bin/flow.js runs tsc's output), never half a bundle.
const fresh = `${outdir}.${process.pid}.tmp`;
const stale = `${outdir}.${process.pid}.old`;
rmSync(fresh, { recursive: true, force: true });
/**
 * The command modules of cli/src/commands/table.ts's table, by command name, read from its source: each gets a
 * bundle of its own. A command that needs the others (`needsAll`: completion) is left to main.cjs.
 */
const TABLE = join(src, "commands", "table.ts");
const commandModules = [
  ...readFileSync(TABLE, "utf8").matchAll(/\{ name: "([a-z-]+)", load: async \(\) => \(await import\("([^"]+)"\)\)[^}]*\}/g),
]
  .filter((m) => !m[0].includes("needsAll"))
  .map((m) => ({ name: m[1], module: m[2] }));
if (commandModules.length < 10) throw new Error(`bundle-cli: found only ${commandModules.length} commands in ${TABLE}`);

/** In a command's own bundle, table.ts's imports of the other commands load an empty module (never called: commandsFor). */
const onlyCommand = (own) => ({
  name: "flowsvc-only-command",
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, (args) =>
      args.importer === TABLE && args.kind === "dynamic-import" && args.path !== own
        ? { path: args.path, namespace: "flowsvc-absent" }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "flowsvc-absent" }, () => ({ contents: "export {};", loader: "js" }));
  },
});

const bundleOne = async (entry, file, plugins = []) => {
  const result = await build({
    entryPoints: [join(src, "bin", entry)],
    outfile: join(fresh, file),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    sourcemap: "linked",
    minifyWhitespace: true,
    minifySyntax: true,
    // import.meta is empty in CommonJS: version.ts and print-format.ts resolve files from it. A getter:
    // pathToFileURL costs ~1 ms of a fresh process, which a command that never reads it does not pay.
    define: { "import.meta.url": "__flowMeta.url" },
    banner: { js: 'const __flowMeta = { get url() { return require("node:url").pathToFileURL(__filename).href; } };' },
    plugins: [...plugins, externals],
    metafile: true,
    logLevel: "warning",
  });
  // A bundled file is required when its command runs: one that imported zod (a core subpath that began
  // to) would load zod there. Keep such a subpath out of BUNDLED_CORE.
  for (const [input, { imports }] of Object.entries(result.metafile.inputs)) {
    if (imports.some((i) => i.path === "zod" || i.path.startsWith("zod/")))
      throw new Error(`bundle-cli: ${input} imports zod; keep it external`);
  }
};

await bundleOne("entry.ts", "flow.cjs");
await bundleOne("main.ts", "main.cjs");
for (const { name, module } of commandModules) await bundleOne("main.ts", `cmd-${name}.cjs`, [onlyCommand(module)]);

/**
 * The V8 code cache (<bundle>.v8cache) of each bundle without an import() of its own (so not main.cjs,
 * server, run or check; signal's import of the local engine is guarded, see cli-code-cache.cjs), written by scripts/cli-code-cache.cjs after a `flow <command> --help` run
 * and, for the commands of WARM_UP, a run against a stand-in API, so it holds the functions those compile;
 * cli/src/bin/entry.ts loads it. In a clean environment: a temporary HOME and config, and no NODE_OPTIONS
 * (V8 rejects a cache made with other flags than the run's).
 */
const codeCacheHome = mkdtempSync(join(tmpdir(), "flowsvc-code-cache-"));
try {
  const env = { PATH: process.env.PATH, HOME: codeCacheHome, FLOWSVC_CONFIG: join(codeCacheHome, "none.json") };
  const cacheScript = join(root, "scripts", "cli-code-cache.cjs");
  const job = join(codeCacheHome, "job.sh");
  writeFileSync(job, "echo hi\n");
  /**
   * What the cache's runs of the user commands do (each a CommandSpec parsed without commander,
   * src/commands/spec.ts): a plain call against the stand-in API (for a command with subcommands, the
   * one typed most: its list), and not `--help`, so the cache holds what that call compiles and not
   * commander (deserializing a cache costs by its size; a subcommand not warmed compiles its own few
   * functions). Every other bundle's run (server, run, check: no cache, they import()) is `--help`.
   */
  const runId = "run-01jd8k2m3n4p5q6r7s8t9v0w1x";
  const WARM_UP = {
    status: [["status", runId]],
    steps: [["steps", runId]],
    runs: [["runs", "ls"]],
    submit: [["submit", job]],
    follow: [["follow", runId]],
    emit: [["emit", "bench.done"]],
    // No local run of that id in the temporary HOME: the signal goes to the API (the local engine's import() is not reached).
    signal: [["signal", runId, "go"]],
    approve: [["approve", runId]],
    rerun: [["rerun", runId, "--from", "deploy"]],
    cancel: [["cancel", runId]],
    secret: [["secret", "ls"]],
    credential: [["credential", "ls"]],
    account: [["account", "ls"]],
    member: [["member", "ls"]],
    token: [["token", "ls"]],
    events: [["events", "ls"]],
    "event-hook": [["event-hook", "ls"]],
    handler: [["handler", "ls"]],
    schedule: [["schedule", "ls"]],
    agents: [["agents", "ls"]],
    graph: [["graph", "ls"]],
    login: [["login", "--token", "code-cache"]],
  };
  for (const [file, command] of [["main.cjs"], ...commandModules.map(({ name }) => [`cmd-${name}.cjs`, name])]) {
    const runs = WARM_UP[command] ?? [[...(command ? [command] : []), "--help"]];
    const args = [cacheScript, join(fresh, file), ...runs.map((run) => JSON.stringify(run))];
    const run = spawnSync(process.execPath, args, { env, stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" });
    if (run.status !== 0) throw new Error(`bundle-cli: the code cache of ${file} failed (${run.status}): ${run.stderr}`);
  }
} finally {
  rmSync(codeCacheHome, { recursive: true, force: true });
}
try {
  renameSync(outdir, stale);
} catch (err) {
  if (err.code !== "ENOENT") throw err;
}
renameSync(fresh, outdir);
rmSync(stale, { recursive: true, force: true });
