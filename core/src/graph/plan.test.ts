import { test } from "node:test";
import assert from "node:assert/strict";
import { GRAPH_VERSION, type GraphDocument, type NodeStatus } from "./model.js";
import { blockedNodes, graphOutcome, readyNodes } from "./plan.js";

/** a -> b -> d, a -> c -> d (a diamond), and e on its own. */
const graph: GraphDocument = {
  version: GRAPH_VERSION,
  nodes: ["a", "b", "c", "d", "e"].map((id) => ({ id, type: "shell", config: { command: "true" } })),
  edges: [
    { from: "a", to: "b" },
    { from: "a", to: "c" },
    { from: "b", to: "d" },
    { from: "c", to: "d" },
  ],
};

type Row = [description: string, statuses: Record<string, NodeStatus>, ready: string[], blocked: string[], outcome: string];

const S = (spec: string): Record<string, NodeStatus> =>
  Object.fromEntries(
    spec
      .split(" ")
      .filter(Boolean)
      .map((kv) => kv.split("=") as [string, NodeStatus]),
  );

const TABLE: Row[] = [
  ["nothing started: the roots are ready", S(""), ["a", "e"], [], "running"],
  ["a running: only e besides", S("a=running"), ["e"], [], "running"],
  ["a done: b and c in parallel", S("a=success e=success"), ["b", "c"], [], "running"],
  ["b done, c running: d waits for c", S("a=success b=success c=running e=success"), [], [], "running"],
  ["c skipped satisfies d", S("a=success b=success c=skipped e=success"), ["d"], [], "running"],
  ["every node skipped or succeeded: succeeded", S("a=success b=skipped c=skipped d=success e=skipped"), [], [], "succeeded"],
  ["a parked: running, nothing downstream ready", S("a=parked e=success"), [], [], "running"],
  ["a failed: its dependents never start; e still may", S("a=failed"), ["e"], ["b", "c", "d"], "running"],
  ["a failed, e done: the run fails", S("a=failed e=success"), [], ["b", "c", "d"], "failed"],
  ["c failed while b runs: running until b ends", S("a=success b=running c=failed e=success"), [], ["d"], "running"],
  ["c failed, b done: failed", S("a=success b=success c=failed e=success"), [], ["d"], "failed"],
  ["the engine marked d cancelled: failed", S("a=success b=success c=failed d=cancelled e=success"), [], [], "failed"],
  ["a cancelled blocks like a failure", S("a=cancelled e=success"), [], ["b", "c", "d"], "failed"],
  ["a node being retried is running", S("a=success b=running c=success e=success"), [], [], "running"],
];

void test("readyNodes, blockedNodes and graphOutcome over a diamond and a lone node", () => {
  for (const [description, statuses, ready, blocked, outcome] of TABLE) {
    assert.deepEqual(readyNodes(graph, statuses), ready, `${description}: ready`);
    assert.deepEqual(blockedNodes(graph, statuses), blocked, `${description}: blocked`);
    assert.equal(graphOutcome(graph, statuses), outcome, `${description}: outcome`);
  }
});

void test("a 500-node chain plans in linear-ish time, and blocking follows the chain whatever the node order", () => {
  const ids = Array.from({ length: 500 }, (_, i) => `n${i}`);
  const chain: GraphDocument = {
    version: GRAPH_VERSION,
    // Listed last to first: blockedNodes must not depend on document order.
    nodes: [...ids].reverse().map((id) => ({ id, type: "shell", config: { command: "true" } })),
    edges: ids.slice(1).map((id, i) => ({ from: ids[i]!, to: id })),
  };
  assert.deepEqual(readyNodes(chain, {}), ["n0"]);
  const started = performance.now();
  const blocked = blockedNodes(chain, { n0: "failed" });
  assert.equal(blocked.length, 499);
  assert.equal(graphOutcome(chain, { n0: "failed" }), "failed");
  assert.ok(performance.now() - started < 1000);
});
