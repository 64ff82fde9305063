// FlowGraph -> Postgres (stored graphs). The spec is the graph document; it is checked as the API's
// PUT checks it (core's parseGraph with the connector manifests, then store's graphSaveProblems) and
// stored with its endpoints only when it differs from the stored document. A document that breaks a
// rule is Ready=False/InvalidSpec with every problem by path (`nodes[1].config.url: required`), and
// the last good graph stays. A graph's trigger and webhook endpoints get minted secrets, as a save
// through the API does (rotated or shown through the API).
//
// `flow graph set` in kubernetes mode writes the FlowGraph too (kube-resource-store.ts putGraph), and
// its reconcile finds Postgres the same. No list diff for graphs: a graph stored before that (Postgres
// only) has no FlowGraph and is not an orphan. A FlowGraph deleted while the controller was down
// leaves its graph until it is removed with `flow graph rm`.
import type { Pool } from "pg";
import { CONNECTOR_CHECKS, assertGraphName, parseGraph, type GraphProblem } from "@flowsvc/core";
import { deleteStoredGraph, getStoredGraph, graphEndpointsOf, graphSaveProblems, putStoredGraph } from "@flowsvc/store";
import type { ConfigKind, Outcome } from "./reconcile-config.js";
import type { FlowObject } from "./reconcile-kinds.js";
import { canonicalJson } from "./flowrun-summary.js";

export type FlowGraphObject = FlowObject<unknown, Record<string, unknown>>;

const invalid = (problems: GraphProblem[]): Outcome => ({
  ready: false,
  reason: "InvalidSpec",
  message: problems.map((p) => `${["spec", p.path.replace(/^\(document\)\.?/, "")].filter(Boolean).join(".")}: ${p.message}`).join("; "),
});

export const graphKind = (pool: Pool): ConfigKind<FlowGraphObject> => ({
  kind: "graph",
  apply: async (obj, scope, name) => {
    assertGraphName(name);
    const parsed = parseGraph(obj.spec, CONNECTOR_CHECKS);
    if (!parsed.ok) return invalid(parsed.problems);
    const extra = graphSaveProblems(parsed.graph, name);
    if (extra.length > 0) return invalid(extra);
    const current = await getStoredGraph(pool, scope.projectId, name);
    if (!current || canonicalJson(current.document) !== canonicalJson(parsed.graph))
      await putStoredGraph(pool, {
        projectId: scope.projectId,
        name,
        document: parsed.graph,
        source: `${JSON.stringify(obj.spec, null, 2)}\n`,
        userId: null,
        endpoints: graphEndpointsOf(parsed.graph, name),
      });
    return { ready: true };
  },
  remove: (scope, name) => deleteStoredGraph(pool, scope.projectId, name),
  stored: () => Promise.resolve([]),
});
