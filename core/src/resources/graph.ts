// A stored graph as a declarative resource (issue 16: FlowGraph): the spec is the graph document
// itself (`flowsvc-graph/v1`, core/src/graph/model.ts), checked by parseGraph as the API's PUT
// checks it; the status says Ready, or not with the parse problems (`nodes[3].config.url: required`).
// The graph name rule lives here, for the API's routes and the reconciler alike.
import { FlowError } from "../errors.js";
import { GraphDocumentShape } from "../graph/model.js";

/** Longest graph name, and its characters (no `.`: the name is a segment of the endpoints' event types). */
export const GRAPH_NAME_MAX = 40;
export const GRAPH_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/;

/** Throws invalid_argument when `name` cannot name a graph. */
export const assertGraphName = (name: string): void => {
  if (GRAPH_NAME.test(name)) return;
  const shown = JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}...` : name);
  throw new FlowError(
    "invalid_argument",
    `graph name ${shown} is not allowed: use 1-${GRAPH_NAME_MAX} ASCII letters, digits, "_" and "-", starting with a letter or digit`,
    { details: { field: "name" } },
  );
};

/** A FlowGraph's spec: the graph document (its shape; parseGraph checks the rest: ids, edges, configs, expressions). */
export const GraphResourceSpec = GraphDocumentShape;
