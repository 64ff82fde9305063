/**
 * `flow handler set|ls|show|rm|init`: the project's handlers, scripts that run once per matching
 * event (spec "Handler"): a script, a pipeline (`--as yaml`), a stored graph (`--graph`) or one
 * node (`--node --config`).
 */
import { readFileSync } from "node:fs";
import { basename, extname } from "node:path";
import { FlowError } from "@flowsvc/core/errors";
import { parsePatterns } from "@flowsvc/core/events";
import { formatAge, formatDetails, formatDocument, formatTime } from "../print-format.js";
import { printList } from "../print.js";
import type { Column } from "../print-format.js";
import { listFrom } from "./api-types.js";
import { scopedPath, withSettings } from "./context.js";
import { InvalidArgumentError, OUTPUT_OPTION, collectAssignment, collectList, formatOf, jsonValueProblem } from "./parsers.js";
import type { CommandSpec } from "./spec.js";

export interface HandlerView {
  name: string;
  on: string[];
  when: string | null;
  reaction: { kind: string; filename: string; size: number; source?: string };
  tags: string[];
  credentials: Record<string, string>;
  created_at: string;
  updated_at: string;
}

interface SetOptions {
  on?: string[];
  when?: string;
  tag?: string[];
  credential?: Record<string, string>;
  as?: string;
  graph?: string;
  node?: string;
  config?: string;
  output?: string;
}

/** Repeatable `--on a,b.*`: every pattern checked here, so a typo is a usage error naming --on. */
export const collectPatterns = (text: string, previous: string[] | undefined): string[] => {
  try {
    return [...new Set([...(previous ?? []), ...parsePatterns(text)])];
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message.replace(/^on: /, "") : String(err));
  }
};

const SCRIPT_FORM = "flow handler set <name> <file> --on <patterns>";
const FORMS = `${SCRIPT_FORM} [--as yaml], or --graph <stored graph>, or --node <kind> --config <json>`;

export type ReactionChoice =
  { kind: "script" | "pipeline"; file: string } | { kind: "graph"; graph: string } | { kind: "node"; type: string };

/** What is wrong with the combination of a file, --graph, --node, --config and --as, if anything. */
const combinationProblem = (file: string | undefined, opts: SetOptions): string | undefined => {
  const given = [file !== undefined, opts.graph !== undefined, opts.node !== undefined].filter(Boolean).length;
  if (given === 0) return "give the handler's script file, --graph <stored graph> or --node <kind>";
  if (given > 1) return "give one reaction: a file, --graph or --node, not several";
  if (opts.config !== undefined && opts.node === undefined) return "--config goes with --node <kind>";
  if (opts.as !== undefined && file === undefined) return `--as ${opts.as} describes a file; --graph and --node take none`;
  return undefined;
};

/** Which reaction the options ask for: exactly one of a file (a script, or a pipeline with --as yaml), --graph, --node. */
export const chooseReaction = (file: string | undefined, opts: SetOptions): ReactionChoice => {
  const refuse = (what: string): never => {
    throw new FlowError("invalid_argument", what, { hint: FORMS });
  };
  const problem = combinationProblem(file, opts);
  if (problem !== undefined) refuse(problem);
  if (opts.graph !== undefined) return { kind: "graph", graph: opts.graph };
  if (opts.node !== undefined) return { kind: "node", type: opts.node };
  const as = opts.as ?? "script";
  if (as === "yaml" || as === "pipeline") return { kind: "pipeline", file: file! };
  if (as !== "script") refuse(`--as ${as}: a handler's file is a script or a pipeline (--as yaml)`);
  return { kind: "script", file: file! };
};

/** `--config <json>`: a JSON object, or a usage error naming --config. */
export const parseNodeConfig = (text: string | undefined): Record<string, unknown> => {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new FlowError("invalid_argument", `--config: not JSON: ${(err as Error).message}`);
  }
  const lost = jsonValueProblem(value);
  if (lost !== undefined) throw new FlowError("invalid_argument", `--config: ${lost}`);
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new FlowError("invalid_argument", "--config: give a JSON object");
  return value as Record<string, unknown>;
};

/** The reaction's body, reading the file when there is one. */
const reactionBody = (choice: ReactionChoice, opts: SetOptions): Record<string, unknown> => {
  if (choice.kind === "graph") return { kind: "graph", graph: choice.graph };
  if (choice.kind === "node") return { kind: "node", type: choice.type, config: parseNodeConfig(opts.config) };
  return { kind: choice.kind, source: readScript(choice.file), filename: basename(choice.file) };
};

const readScript = (file: string): string => {
  try {
    // node:fs, not node:fs/promises: no thread pool and no loading of fs/promises at start-up (issue 15).
    return readFileSync(file, "utf8");
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message;
    throw new FlowError("invalid_argument", `cannot read ${file}: ${reason}`, {
      hint: "give the path of the handler's script",
      cause: err,
    });
  }
};

/** True when the file looks like something other than a shell script: it will still run under bash -eu. */
const looksNotBash = (file: string, source: string): boolean => {
  const ext = extname(file);
  const shebang = /^#!(.*)/.exec(source)?.[1] ?? "";
  return (ext !== "" && ext !== ".sh" && ext !== ".bash") || (shebang !== "" && !/\b(ba)?sh\b/.test(shebang));
};

const setSpec: CommandSpec = {
  name: "set",
  description: "create or replace a handler: a script that runs under bash -eu, once per matching event, in a run of its own (member)",
  arguments: [
    { name: "<name>", description: "the handler's name: 1-64 of A-Z a-z 0-9 . _ -" },
    { name: "[file]", description: "the script; it always runs under `bash -eu`, whatever its extension or shebang" },
  ],
  options: [
    {
      flags: "--on <patterns>",
      description: "event types to react to, comma-separated (repeatable): exact, prefix.* or *",
      parse: collectPatterns,
    },
    {
      flags: "--when <cel>",
      description: "a CEL predicate over `event` (type, key, payload, ...); compiled now; guard optional fields with has()",
    },
    { flags: "--tag <tag>", description: "tag every run the handler starts (repeatable)", parse: collectList },
    {
      flags: "--credential <ENV=name>",
      description: "put a credential in the run's environment as ENV (repeatable); such handlers do not serve untrusted events",
      parse: collectAssignment,
    },
    { flags: "--as <kind>", description: "what the file is: script (default) or yaml (a pipeline; a snapshot is stored now)" },
    { flags: "--graph <graph>", description: "a stored graph as the reaction, read when each event arrives; its input is the event" },
    { flags: "--node <kind>", description: "a single node as the reaction; its input is the event" },
    { flags: "--config <json>", description: "the node's config (a JSON object), with --node" },
    OUTPUT_OPTION,
  ],
  examples: [
    "flow handler init > router.sh && flow handler set router router.sh --on 'deploy.*,release.published'",
    "flow handler set big-orders orders.sh --on order.created --when 'has(event.payload.total) && event.payload.total > 1000'",
    "flow handler set on-failure notify.sh --on run.failed --tag alerts --credential SLACK_TOKEN=slack",
    "flow handler set ci ci.yaml --as yaml --on push",
    "flow handler set triage --graph triage --on issue.opened",
    `flow handler set ping --node emit --config '{"type":"pinged"}' --on deploy.done`,
  ],
  action: async (deps, { args: [name = "", file], opts: options, flags }) => {
    const opts = options as SetOptions;
    const choice = chooseReaction(file, opts);
    if (!opts.on?.length)
      throw new FlowError("invalid_argument", "--on is required: the event types this handler reacts to", {
        hint: "e.g. --on deploy.requested or --on 'deploy.*,run.failed'",
      });
    const reaction = reactionBody(choice, opts);
    const body = {
      on: opts.on,
      ...(opts.when === undefined ? {} : { when: opts.when }),
      reaction,
      tags: opts.tag ?? [],
      credentials: opts.credential ?? {},
    };
    await withSettings(deps, flags, async (ctx) => {
      const h = await ctx.api.call<HandlerView>("PUT", scopedPath(ctx, "handlers", name), body);
      const format = formatOf(opts);
      if (format !== "table") ctx.io.out(formatDocument(h, format));
      else
        ctx.io.note(
          `handler ${h.name} ${h.created_at === h.updated_at ? "created" : "replaced"}: on ${h.on.join(",")}${h.when ? ` when ${h.when}` : ""}`,
        );
      if (choice.kind === "script" && looksNotBash(choice.file, String(reaction["source"])))
        ctx.io.note(`note: ${basename(choice.file)} will run under \`bash -eu\`, whatever its extension or shebang`);
    });
  },
};

const HANDLER_COLUMNS = (now: Date): Array<Column<HandlerView>> => [
  { header: "NAME", value: (h) => h.name },
  { header: "ON", value: (h) => h.on.join(",") },
  { header: "WHEN", value: (h) => h.when ?? "-" },
  { header: "REACTION", value: (h) => (h.reaction.kind === "pipeline" ? `pipeline:${h.reaction.filename}` : h.reaction.filename) },
  { header: "TAGS", value: (h) => (h.tags.length ? h.tags.join(",") : "-") },
  { header: "UPDATED", value: (h) => formatAge(h.updated_at, now) },
];

const listSpec: CommandSpec = {
  name: "ls",
  aliases: ["list"],
  description: "list the project's handlers (viewer)",
  options: [OUTPUT_OPTION],
  examples: ["flow handler ls", "flow handler ls -o json | jq -r '.[].name'"],
  action: async (deps, { opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const handlers = listFrom<HandlerView>(await ctx.api.call("GET", scopedPath(ctx, "handlers")), ["handlers"]);
      printList(ctx.io, formatOf(opts), handlers, { columns: HANDLER_COLUMNS(ctx.now), empty: "no handlers" });
    });
  },
};

/** One handler for people: its fields, then the script. */
export const formatHandlerDetails = (h: HandlerView, now: Date): string => {
  const credentials = Object.entries(h.credentials).map(([env, cred]) => `${env}=${cred}`);
  return (
    formatDetails([
      ["name", h.name],
      ["on", h.on.join(",")],
      ["when", h.when ?? "-"],
      h.reaction.kind === "script"
        ? ["script", `${h.reaction.filename} (${h.reaction.size} bytes, runs under bash -eu)`]
        : ["reaction", `${h.reaction.kind === "pipeline" ? "pipeline " : ""}${h.reaction.filename} (a graph run; its input is the event)`],
      ["tags", h.tags.length ? h.tags.join(",") : "-"],
      ["credentials", credentials.length ? credentials.join(" ") : "-"],
      ["created", formatTime(h.created_at, now)],
      ["updated", formatTime(h.updated_at, now)],
    ]) + (h.reaction.source === undefined ? "" : `\n${h.reaction.source}`)
  );
};

const showSpec: CommandSpec = {
  name: "show",
  description: "show one handler, its script included (viewer)",
  arguments: [{ name: "<name>", description: "the handler's name" }],
  options: [OUTPUT_OPTION],
  examples: ["flow handler show router", "flow handler show router -o json | jq -r .reaction.source > router.sh"],
  action: async (deps, { args: [name = ""], opts, flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      const h = await ctx.api.call<HandlerView>("GET", scopedPath(ctx, "handlers", name));
      const format = formatOf(opts);
      ctx.io.out(format === "table" ? formatHandlerDetails(h, ctx.now) : formatDocument(h, format));
    });
  },
};

const rmSpec: CommandSpec = {
  name: "rm",
  description: "remove a handler; runs it already started go on (member)",
  arguments: [{ name: "<name>", description: "the handler's name" }],
  examples: ["flow handler rm router"],
  action: async (deps, { args: [name = ""], flags }) => {
    await withSettings(deps, flags, async (ctx) => {
      await ctx.api.call("DELETE", scopedPath(ctx, "handlers", name));
      ctx.io.note(`handler ${name} removed`);
    });
  },
};

const initSpec = (): CommandSpec => ({
  name: "init",
  description: `print a starter handler script to stdout: ${Object.entries(HANDLER_TEMPLATES)
    .map(([k, t]) => `${k} (${t.summary})`)
    .join("; ")}`,
  arguments: [{ name: "[template]", description: `which one: ${Object.keys(HANDLER_TEMPLATES).join(", ")}`, default: "router" }],
  examples: ["flow handler init > router.sh", "flow handler init on-failure > on-failure.sh"],
  action: ({ io }, { args: [template = "router"] }) => {
    const t = (HANDLER_TEMPLATES as Record<string, { script: string } | undefined>)[template];
    if (!t)
      throw new FlowError("invalid_argument", `no starter script named ${template}`, {
        hint: `choose one of: ${Object.keys(HANDLER_TEMPLATES).join(", ")}`,
      });
    io.out(t.script);
    return Promise.resolve();
  },
});

/**
 * Starter scripts for `flow handler init`. Plain shell on purpose: a handler's agent is only known
 * to have bash (no jq, no python3). The e2e test registers the router and runs it.
 */
export const HANDLER_TEMPLATES = {
  router: {
    summary: "one script for several event types, dispatching on $CI_TRIGGER_EVENT",
    script: `#!/usr/bin/env bash
# A router handler: one script serves several event types and dispatches on the type.
#
# Register it (a handler always runs under \`bash -eu\`, whatever its extension or shebang):
#   flow handler init router > router.sh
#   flow handler set router router.sh --on 'deploy.*,release.published'
#
# What each run gets (one run per matching event, each with its own run id):
#   $FLOW_INPUT_FILE      the whole envelope as JSON: {"type", "event", "key"?, "payload", ...}
#   $CI_TRIGGER_EVENT     the event type         $CI_TRIGGER_EVENT_ID   its bus id (evt-...)
#   $CI_TRIGGER_REPO, _REF, _SHA, _SENDER ...   forge events only: read them as \${CI_TRIGGER_REPO:-}
# There is no checkout: the working directory is a scratch directory of this run.
# \`flow step\`, \`flow emit\`, \`flow sleep\` ... work as in any script (an emit from here chains one
# generation deeper; chains stop at 5).

# json_str FIELD: the first \`"FIELD": "text"\` in the envelope, with plain shell tools (no jq, no
# python3). Good for simple flat strings (no escaped quotes); for nested data use jq or python3.
json_str() {
  grep -o '"'"$1"'"[[:space:]]*:[[:space:]]*"[^"\\]*"' "$FLOW_INPUT_FILE" | head -n 1 | sed -e 's/^.*:[[:space:]]*"//' -e 's/"$//'
}

on_deploy_requested() {
  local target
  target=$(json_str environment)
  echo "deploy of \${CI_TRIGGER_REPO:-this project} to \${target:-staging} requested by event $CI_TRIGGER_EVENT_ID"
  # A step runs once, even when the run is replayed after a sleep or a crash:
  flow step deploy -- echo "deploying to \${target:-staging} (put the real command here)"
}

on_release_published() {
  echo "release $(json_str tag) published"
}

case "$CI_TRIGGER_EVENT" in
  deploy.requested) on_deploy_requested ;;
  release.published) on_release_published ;;
  *) echo "router: no route for $CI_TRIGGER_EVENT ($CI_TRIGGER_EVENT_ID); ignoring it" ;;
esac
`,
  },
  "on-failure": {
    summary: "reacts to run.failed and raises an alert event",
    script: `#!/usr/bin/env bash
# Reacts to failed runs of this project: reads the failure from the envelope and raises an alert
# event that other handlers (a chat notifier, a pager) can take.
#
# Register it:
#   flow handler init on-failure > on-failure.sh
#   flow handler set on-failure on-failure.sh --on run.failed --when '!("flaky-ok" in event.payload.tags)'
#
# A handler run's own run.failed is recorded but never delivered again, so this cannot loop.
# The payload of run.failed carries run_id, status, workflow, tags, trigger and error (its last
# 4000 characters); \`cat "$FLOW_INPUT_FILE"\` shows the whole envelope.

# json_str FIELD: the first \`"FIELD": "text"\` in the envelope (flat strings only; see above).
json_str() {
  grep -o '"'"$1"'"[[:space:]]*:[[:space:]]*"[^"\\]*"' "$FLOW_INPUT_FILE" | head -n 1 | sed -e 's/^.*:[[:space:]]*"//' -e 's/"$//'
}

failed_run=$(json_str run_id)
echo "run \${failed_run:-?} failed (event $CI_TRIGGER_EVENT_ID)"
# Run ids are plain [a-z0-9-], so this JSON needs no escaping. The emit is checkpointed: a replay
# of this run resolves to the same alert event.
flow emit alert.run_failed --key "\${failed_run:-unknown}" --payload "{\\"run\\":\\"\${failed_run:-unknown}\\"}"
`,
  },
} as const;

export const handlerSpec: CommandSpec = {
  name: "handler",
  description: "manage the project's handlers: scripts that run once per matching event",
  subcommands: [setSpec, listSpec, showSpec, rmSpec, initSpec()],
  examples: ["flow handler init > router.sh", "flow handler set router router.sh --on 'deploy.*'", "flow handler ls"],
};
