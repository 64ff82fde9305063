/**
 * `flow check <file>`: validates a graph document (`flowsvc-graph/v1`, a `.json` file, or `-` for
 * stdin) here, with the rules the server applies (core's parseGraphText: shape, ids, edges, cycles,
 * each node type's config, and every CEL expression), without a server or a token. Prints
 * `ok: <n> nodes, <m> edges`, or one `error: <path>: <message>` line per problem on stderr and
 * exits 2 (invalid_argument). A `.yaml`/`.yml` file is a pipeline (`flowsvc/pipeline/v1`): core's
 * pipeline compiler checks it and the graph it compiles to; each problem is printed as
 * `error: line L, column C: <path>: <message>` (the YAML node at fault).
 *
 * This is the one CLI command that loads zod (core's graph model): it imports @flowsvc/core/graph
 * (or @flowsvc/core/pipeline, which also loads yaml) inside its action, so `flow --help` and the other commands never load it
 * (cli/src/bin/flow-imports.test.ts).
 */
import { open } from "node:fs/promises";
import { extname } from "node:path";
import { Command } from "commander";
import { FlowError, problemLine } from "@flowsvc/core/errors";
import type * as GraphModel from "@flowsvc/core/graph";
import type { CommandDeps } from "./context.js";
import { examples } from "./options.js";

/** The largest document read (core's GRAPH_LIMITS.textBytes, 1 MiB), checked before reading: this module does not load core's graph model to ask. */
const MAX_BYTES = 1024 * 1024;

const usage = (message: string, hint?: string): FlowError => new FlowError("invalid_argument", message, hint === undefined ? {} : { hint });

/** The file's text, refusing a directory or a file over 1 MiB before reading it; `what` names the document in a refusal. */
const readGraphFile = async (file: string, what: "graph document" | "pipeline" = "graph document"): Promise<string> => {
  let handle;
  try {
    handle = await open(file, "r");
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message;
    throw usage(
      `cannot read ${file}: ${reason}`,
      what === "pipeline" ? "give the path of a pipeline (.yaml)" : "give the path of a graph document (.json)",
    );
  }
  try {
    const info = await handle.stat();
    if (info.isDirectory()) throw usage(`cannot read ${file}: it is a directory`);
    if (info.size > MAX_BYTES) throw usage(`${file} is ${info.size} bytes; a ${what} is at most ${MAX_BYTES} (1 MiB)`);
    return await handle.readFile("utf8");
  } finally {
    await handle.close();
  }
};

const kindOf = (file: string): "json" | "yaml" | "other" => {
  if (file === "-") return "json";
  const ext = extname(file).toLowerCase();
  if (ext === ".json") return "json";
  if (ext === ".yaml" || ext === ".yml") return "yaml";
  return "other";
};

/** A connector's manifest, as far as this command passes it on. */
interface Manifest {
  type: string;
  credential: { kinds: readonly string[]; required: boolean };
}
/**
 * Connector manifests and their config check, once core/src/graph/connectors.ts is exported from
 * the graph model (issue 10, part D); until then dotted types pass unchecked.
 */
type GraphModule = typeof GraphModel & {
  connectorManifest?: (type: string) => Manifest | undefined;
  connectorConfigProblems?: (manifest: Manifest, config: unknown) => string[];
};

const connectorChecks = (graph: GraphModule): GraphModel.ParseGraphOptions => {
  const { connectorManifest: manifestOf, connectorConfigProblems: problemsOf } = graph;
  if (!manifestOf) return {};
  if (!problemsOf) return { manifestOf };
  return {
    manifestOf,
    connectorProblems: (type, config) => {
      const manifest = manifestOf(type);
      return manifest ? problemsOf(manifest, config) : [];
    },
  };
};

/** A pipeline: compiled by core (positions of every problem), nothing sent anywhere. */
const checkPipelineFile = async (deps: CommandDeps, file: string): Promise<void> => {
  const text = await readGraphFile(file, "pipeline");
  const pipeline = await import("@flowsvc/core/pipeline");
  const result = pipeline.compilePipeline(text);
  if (!result.ok) {
    for (const p of result.problems) deps.io.note(`error: ${pipeline.formatPipelineProblem(p)}`);
    deps.setExitCode(2);
    return;
  }
  const { graph, jobs } = result.pipeline;
  deps.io.out(`ok: pipeline, ${Object.keys(jobs).length} jobs, ${graph.nodes.length} nodes, ${graph.edges.length} edges`);
};

export const checkCommand = (deps: CommandDeps): Command =>
  new Command("check")
    .description(
      "validate a graph document (.json) or a pipeline (.yaml) here, without submitting it: shape, configs, needs/edges, cycles and expressions",
    )
    .argument(
      "<file>",
      "the graph document (flowsvc-graph/v1 JSON) or pipeline (flowsvc/pipeline/v1 YAML), or - to read a graph from stdin",
    )
    .addHelpText(
      "after",
      `${examples("flow check deploy.json", "cat deploy.json | flow check -", "flow check ci.yaml")}
Prints "ok: <n> nodes, <m> edges" (a pipeline: "ok: pipeline, <j> jobs, <n> nodes, <m> edges"),
or one "error: <path>: <message>" line per problem (a pipeline: "error: line L, column C: <path>: <message>") and exits 2.
`,
    )
    .action(async (file: string) => {
      const kind = kindOf(file);
      if (kind === "yaml") return checkPipelineFile(deps, file);
      if (kind === "other")
        throw usage(
          `${file}: flow check validates graph documents (.json files) and pipelines (.yaml, .yml files)`,
          "a script needs no check: `flow run <file>` runs it here",
        );
      const text = file === "-" ? await deps.io.readStdin() : await readGraphFile(file);
      const graph = (await import("@flowsvc/core/graph")) as GraphModule;
      const result = graph.parseGraphText(text, connectorChecks(graph));
      if (!result.ok) {
        for (const p of result.problems) deps.io.note(`error: ${problemLine(p)}`);
        deps.setExitCode(2);
        return;
      }
      const { nodes, edges } = result.graph;
      deps.io.out(`ok: ${nodes.length} nodes, ${edges.length} edges`);
    });
