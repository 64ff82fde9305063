/**
 * `flow submit <file>`: a new run from a script. Prints only the run id on stdout, so
 * `run=$(flow submit f.sh)` works; with --follow the log goes to stdout and the id to stderr.
 */
import { basename } from "node:path";
import { FlowError } from "@flowsvc/core/errors";
import type { SubmitAnswer } from "./api-types.js";
import type { SettingFlags } from "../config.js";
import { scopedPath, withSettings } from "./context.js";
import type { CommandDeps } from "./context.js";
import { followRun } from "./follow.js";
import { collectEnv, collectList, jsonFlagProblem, parseRetryFlag, splitInterpreter } from "./parsers.js";
import type { CommandSpec } from "./spec.js";
import { isGraphSubmit, isPipelineSubmit } from "../document-kind.js";
import { readSource } from "../read-source.js";

interface SubmitOptions {
  as?: string;
  /** A graph's input (JSON text). */
  input?: string;
  interpreter?: string;
  follow?: boolean;
  idempotencyKey?: string;
  env?: Record<string, string>;
  /** `ENV=name` as typed; parsed by core's rules in the action (only then is core's credential module loaded). */
  credential?: string[];
  tag?: string[];
  retry?: { attempts: number; backoff_ms: number };
}

/** The submit body of docs/internals.md: `{kind, source, filename, interpreter?, env, credentials?, idempotency_key?, tags}`. */
type BodyOptions = Omit<SubmitOptions, "as" | "follow" | "credential"> & { credential?: Record<string, string> };

/**
 * `--credential ENV=name` flags as core's rules read them, imported only when a flag is given.
 */
const parseCredentialFlags = async (flags: readonly string[] | undefined): Promise<Record<string, string> | undefined> => {
  if (flags === undefined || flags.length === 0) return undefined;
  const { parseCredentialFlag } = await import("@flowsvc/core/credentials");
  return Object.fromEntries(flags.map((text) => parseCredentialFlag(text)));
};

export const submitBody = (file: string, source: string, opts: BodyOptions): Record<string, unknown> => ({
  kind: "script",
  source,
  filename: basename(file),
  ...(opts.interpreter === undefined ? {} : { interpreter: splitInterpreter(opts.interpreter) }),
  env: opts.env ?? {},
  ...(opts.credential === undefined ? {} : { credentials: opts.credential }),
  ...(opts.idempotencyKey === undefined ? {} : { idempotency_key: opts.idempotencyKey }),
  tags: opts.tag ?? [],
  ...(opts.retry === undefined ? {} : { retry: opts.retry }),
});

export { isGraphSubmit, isPipelineSubmit };

/**
 * The graph (or pipeline) submit body: `{as: "graph"|"pipeline", source, filename, input?, idempotency_key?, tags}`
 * (the server checks the document). `--credential` on a pipeline is refused (spec, "Where a credential ... may be named").
 */
export const graphSubmitBody = (
  file: string,
  source: string,
  opts: SubmitOptions,
  as: "graph" | "pipeline" = "graph",
): Record<string, unknown> => {
  if (as === "pipeline" && opts.credential !== undefined)
    throw new FlowError(
      "invalid_argument",
      "--credential is refused on a pipeline submit: a pipeline names its credentials in its credentials: maps",
      {
        details: { field: "credential" },
        hint: "declare it in the pipeline: credentials: {ENV_VAR: credential-name} (workflow or job level)",
      },
    );
  const unsupported = (["interpreter", "env", "credential", "retry"] as const).filter((k) => opts[k] !== undefined);
  if (unsupported.length > 0)
    throw new FlowError(
      "invalid_argument",
      as === "graph"
        ? `--${unsupported[0]} applies to scripts; a graph declares its nodes' interpreters, env, credentials and retries`
        : `--${unsupported[0]} applies to scripts; a pipeline declares its jobs' env, credentials and retries`,
    );
  let input: unknown;
  if (opts.input !== undefined) {
    const r = jsonFlagProblem(opts.input);
    if ("problem" in r) throw new FlowError("invalid_argument", `--input: ${r.problem}`, { details: { field: "input" } });
    input = r.value;
  }
  return {
    as,
    source,
    filename: basename(file),
    ...(input === undefined ? {} : { input }),
    ...(opts.idempotencyKey === undefined ? {} : { idempotency_key: opts.idempotencyKey }),
    tags: opts.tag ?? [],
  };
};

export const submitSpec: CommandSpec = {
  name: "submit",
  description:
    "submit a script, a graph (a .json file or --as graph) or a pipeline (a .yaml file or --as pipeline|yaml) as a new run and print its id",
  arguments: [
    {
      name: "<file>",
      description:
        "the script to run; by extension it runs with python3 (.py), bun run (.ts), node (.js, .mjs), go run (.go), else bash -eu",
    },
  ],
  options: [
    {
      flags: "--as <kind>",
      description: "what the file is (default: graph for .json, pipeline for .yaml/.yml, else script)",
      choices: ["script", "graph", "pipeline", "yaml"],
    },
    { flags: "--input <json>", description: "a graph's or pipeline's input, read by its expressions as input.*" },
    { flags: "--interpreter <cmd>", description: "the command that runs the file, split on spaces (overrides the extension)" },
    { flags: "--follow", description: "stream the run's log to stdout; exit 0 if it succeeds, 1 if it fails or is cancelled" },
    { flags: "--idempotency-key <key>", description: "a repeat submit under the same key answers the first run's id instead of a new run" },
    { flags: "--env <NAME=VALUE>", description: "set a variable in the run's environment (repeatable)", parse: collectEnv },
    {
      flags: "--credential <ENV=name>",
      description:
        "give the script the credential <name> as variable ENV, resolved when the job starts; a missing one fails the job (repeatable)",
      parse: collectList,
    },
    { flags: "--tag <tag>", description: "tag the run (repeatable)", parse: collectList },
    {
      flags: "--retry <attempts[,backoff]>",
      description: "re-run the whole script when it fails, at most <attempts> attempts in all, <backoff> apart (e.g. 3,30s)",
      parse: parseRetryFlag,
    },
  ],
  examples: [
    "run=$(flow submit build.sh)",
    "flow submit deploy.py --env TARGET=staging --tag deploy --follow",
    "flow submit release.sh --credential GH_TOKEN=github",
    "flow submit nightly.sh --idempotency-key nightly-2025-01-31",
    "flow submit flaky.sh --retry 3,10s --follow",
    'flow submit deploy-graph.json --input \'{"env":"staging"}\'',
    'flow submit job.js --interpreter "node --enable-source-maps"',
  ],
  action: async (deps, { args: [file = ""], opts: parsed, flags }) => {
    const opts = parsed as SubmitOptions;
    const documentKind = isGraphSubmit(file, opts.as) ? "graph" : isPipelineSubmit(file, opts.as) ? "pipeline" : undefined;
    if (documentKind) {
      if (documentKind === "pipeline" && opts.credential !== undefined) graphSubmitBody(file, "", opts, documentKind); // refused before the file is read
      const graphBody = graphSubmitBody(file, await readSource(file), opts, documentKind);
      return submitAndPrint(deps, flags, { body: graphBody, follow: opts.follow });
    }
    if (opts.input !== undefined)
      throw new FlowError("invalid_argument", "--input applies to graphs and pipelines (a .json or .yaml file, or --as graph|pipeline)");
    const credential = await parseCredentialFlags(opts.credential); // a bad flag is refused before the file is read
    const body = submitBody(file, await readSource(file), { ...opts, credential });
    await submitAndPrint(deps, flags, { body, follow: opts.follow });
  },
};

/** POSTs the submit body; prints the id (or follows the run's log). */
const submitAndPrint = async (
  deps: CommandDeps,
  flags: SettingFlags,
  s: { body: Record<string, unknown>; follow: boolean | undefined },
): Promise<void> =>
  withSettings(deps, flags, async (ctx) => {
    const run = await ctx.api.call<SubmitAnswer>("POST", scopedPath(ctx, "runs"), s.body);
    if (run.duplicate) ctx.io.note(`duplicate: run ${run.id} was already submitted under this idempotency key`);
    if (!s.follow) {
      ctx.io.out(run.id);
      return;
    }
    ctx.io.note(run.id);
    deps.setExitCode(await followRun(ctx, run.id));
  });
