/**
 * Issue 10's second graph benchmark: a 100-node fan-out/fan-in of `http` nodes against a local
 * peer (one start node, 100 parallel http nodes, one join), submit to `succeeded`, and the peak
 * number of requests the peer had in flight at once. Target: < 1 s. Figures only.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fmt, median, startBenchServer, submitGraph, waitForRun, wallMs } from "./support.js";

const N = 100;
const ROUNDS = 3;
/** How long the peer holds each answer: long enough that parallel requests overlap. */
const PEER_DELAY_MS = 20;

const main = async (): Promise<void> => {
  let inFlight = 0;
  let peak = 0;
  const peer = createServer((_req, res) => {
    inFlight++;
    peak = Math.max(peak, inFlight);
    setTimeout(() => {
      inFlight--;
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    }, PEER_DELAY_MS);
  });
  await new Promise<void>((r) => peer.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(peer.address() as AddressInfo).port}`;
  const graph = JSON.stringify({
    version: "flowsvc-graph/v1",
    nodes: [
      { id: "start", type: "http", config: { url: `${url}/start` } },
      ...Array.from({ length: N }, (_, i) => ({ id: `h${i}`, type: "http", config: { url: `${url}/h/${i}` } })),
      { id: "join", type: "http", config: { url: `${url}/join` } },
    ],
    edges: Array.from({ length: N }, (_, i) => [
      { from: "start", to: `h${i}` },
      { from: `h${i}`, to: "join" },
    ]).flat(),
  });
  const server = await startBenchServer();
  try {
    await waitForRun(server, await submitGraph(server, "fanout.json", graph));
    const walls: number[] = [];
    const peaks: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      peak = 0;
      const run = await waitForRun(server, await submitGraph(server, "fanout.json", graph));
      if (run.status !== "succeeded") throw new Error(`run ${run.id} ${run.status}: ${run.error}`);
      walls.push(wallMs(run));
      peaks.push(peak);
    }
    console.log(
      `fan-out/fan-in of ${N} http nodes (peer answers after ${PEER_DELAY_MS} ms), submit to succeeded, ${ROUNDS} runs after one warm-up`,
    );
    console.log(`  median ${fmt(median(walls))}   min ${fmt(Math.min(...walls))}   max ${fmt(Math.max(...walls))}`);
    console.log(`  peak concurrent requests at the peer: ${peaks.join(", ")} (of ${N})`);
    console.log("  target < 1 s");
  } finally {
    await server.stop();
    peer.close();
  }
};

await main();
