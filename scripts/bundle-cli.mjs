#!/usr/bin/env node
// Bundles the user CLI (cli/src/bin/main.ts and the client modules it imports) into
// cli/dist/bundle/, run by `npm run build` after tsc. cli/dist/bin/flow.js loads main.js from there.
//
// Why: a `flow` command paid ~0.5 s of module loading before its first request (issue 15). Loading
// one small entry file and one chunk per command, with commander inlined, instead of ~25 modules
// resolved one by one, is most of what brings a command within 1.5x `node -e 0`.
//
// What is bundled: cli/src, except the server and the local engine (cli/src/server/**, but for the
// `flow server` definition in command.ts, and cli/src/local/**), plus commander. Everything else
// stays external and is loaded at run time from where tsc and npm put it: the server and local
// engine from cli/dist, and every other package (core, zod, yaml, the agent's in-script client, ...)
// from node_modules, so one copy of each is ever loaded (FlowError stays one class). The module
// list test (cli/src/bin/flow-imports.test.ts) relies on that: a client command that imported a
// server module would resolve it at run time, where the test sees it.
// Each lazily imported command becomes a chunk of its own (esbuild's splitting). Whitespace and
// syntax are minified, names kept; source maps are written beside each file (node
// --enable-source-maps maps a stack trace back to cli/src).
import { build } from "esbuild";
import { renameSync, rmSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "cli", "src");
const outdir = join(root, "cli", "dist", "bundle");
const BUNDLED_PACKAGES = new Set(["commander"]);
const SERVER_DEFINITION = join(src, "server", "command.ts");

const isLoadedFromDist = (file) =>
  (file.startsWith(join(src, "server") + sep) && file !== SERVER_DEFINITION) || file.startsWith(join(src, "local") + sep);

/** The server and the local engine stay in tsc's output: an import of one is rewritten to its cli/dist file. */
const externals = {
  name: "flowsvc-externals",
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, (args) => {
      const file = resolve(args.resolveDir, args.path).replace(/\.js$/, ".ts");
      if (!isLoadedFromDist(file)) return undefined;
      const distFile = join(root, "cli", "dist", relative(src, file)).replace(/\.ts$/, ".js");
      return { path: relative(outdir, distFile).split(sep).join("/"), external: true };
    });
    b.onResolve({ filter: /^[^./]/ }, (args) => {
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
await build({
  entryPoints: [join(src, "bin", "main.ts")],
  outdir: fresh,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  sourcemap: "linked",
  minifyWhitespace: true,
  minifySyntax: true,
  // commander is CommonJS: give the bundle a require() for its own require("node:...") calls.
  banner: { js: 'import { createRequire as __flowRequire } from "node:module"; const require = __flowRequire(import.meta.url);' },
  plugins: [externals],
  logLevel: "warning",
});
try {
  renameSync(outdir, stale);
} catch (err) {
  if (err.code !== "ENOENT") throw err;
}
renameSync(fresh, outdir);
rmSync(stale, { recursive: true, force: true });
