/**
 * `flow run <file>`: a local run. The file runs in place, in the current directory, with every
 * in-script primitive working against a local engine in this process (cli/src/local): no server.
 * Sleeps and waits really wait; `flow signal <run-id> <name>` from another shell wakes a wait.
 * Prints `local run <id>` on stderr, streams the script's output, exits with its exit status.
 */
import { Command, Option } from "commander";
import type { CommandDeps } from "./context.js";
import { collectEnv, examples } from "./options.js";

interface RunOptions {
  interpreter?: string;
  env?: Record<string, string>;
  runId?: string;
}

export const runCommand = (deps: CommandDeps): Command =>
  new Command("run")
    .description("run a script here and now, in the current directory, with durable primitives served locally (no server)")
    .argument("<file>", "the script; by extension it runs with python3 (.py), bun run (.ts), node (.js, .mjs), go run (.go), else bash -eu")
    .option("--interpreter <cmd>", "the command that runs the file, split on spaces (overrides the extension)")
    .option(
      "--env <NAME=VALUE>",
      "set a variable in the script's environment (repeatable); the script otherwise gets only HOME, USER, LANG, TZ, PATH and the like, as on an agent",
      collectEnv,
    )
    .addOption(new Option("--run-id <id>", "the run id to use (a spawned local run's, chosen by its parent)").hideHelp())
    .addHelpText(
      "after",
      `${examples(
        "flow run deploy.sh --env TARGET=staging",
        'flow run job.py --interpreter "python3 -u"',
        'flow signal <run-id> approved --payload \'{"by":"me"}\'   # from another shell, to wake `flow wait-signal approved`',
      )}
Local runs keep their state in $XDG_STATE_HOME/flowsvc/local (default ~/.local/state/flowsvc/local):
signals, locks (first come, first served between local runs), entity state (--entity), and the
logs of runs started by \`flow spawn\`, which run in the background. wait-event, emit, call and
spawn --as pipeline need a server, and so do pipeline (.yaml) and graph (.json) files: flow run
refuses them, naming the \`flow submit <file>\` that runs them on one.
`,
    )
    .action(async (file: string, opts: RunOptions) => {
      const [{ runLocal }, { processTerminal }] = await Promise.all([import("../local/run-local.js"), import("../local/print-local.js")]);
      deps.setExitCode(
        await runLocal({
          file,
          env: opts.env ?? {},
          cwd: process.cwd(),
          processEnv: deps.env,
          terminal: processTerminal(),
          ...(opts.interpreter !== undefined ? { interpreter: opts.interpreter } : {}),
          ...(opts.runId !== undefined ? { runId: opts.runId } : {}),
        }),
      );
    });
