/**
 * Kubernetes mode's figures (issue 16), against the fake API server with the real reconcilers and a
 * real Postgres; printed, never asserted:
 *   - `kubectl apply` of a FlowHandler to Ready=True (observedGeneration caught up): p50/p99 over 50
 *     applies (target p50 < 500 ms);
 *   - writes to the API server per run by the FlowRun mirror (creates and patches; the Pod and its
 *     token Secret are the launcher's and not counted here) for runs with no parks (target <= 4);
 *   - the FlowRun object's size for a run that prints 10 MiB (target < 4 KiB).
 */
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appendLogs, findProject, finishRun, markRunRunning, waitFor, withTransaction } from "@flowsvc/store";
import { getCr, readyOf, scriptRun, startHarness, type Harness } from "@flowsvc/test/kube/reconcile-harness";

const NS = "bench";
const dir = mkdtempSync(join(tmpdir(), "kube-bench-"));

const kubectlApply = (h: Harness, yaml: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const child = spawn("kubectl", ["--kubeconfig", h.api.kubeconfigPath, "--cache-dir", join(dir, "cache"), "apply", "-f", "-"], {
      stdio: ["pipe", "ignore", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`kubectl apply: ${err}`))));
    child.stdin.end(yaml);
  });

const pct = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

const applyToReady = async (h: Harness): Promise<void> => {
  const times: number[] = [];
  const reconcile: number[] = [];
  for (let i = 0; i < 50; i++) {
    const yaml = [
      "apiVersion: flowsvc.io/v1alpha1",
      "kind: FlowHandler",
      "metadata: {name: bench-handler, namespace: bench}",
      "spec:",
      "  events: [deploy.*]",
      `  when: 'event.payload.n != ${i}'`,
      "  reaction: {kind: script, filename: h.sh, source: 'echo hi'}",
      "",
    ].join("\n");
    const t0 = performance.now();
    await kubectlApply(h, yaml);
    const t1 = performance.now();
    await waitFor(
      "Ready",
      async () => {
        const cr = await getCr(h, "flowhandlers", NS, "bench-handler");
        return readyOf(cr)?.status === "True" && cr?.status?.observedGeneration === cr?.metadata.generation;
      },
      10_000,
      5,
    );
    times.push(performance.now() - t0);
    reconcile.push(performance.now() - t1);
  }
  console.log(`kubectl apply -> Ready=True over 50 applies: p50 ${pct(times, 50).toFixed(0)} ms, p99 ${pct(times, 99).toFixed(0)} ms`);
  console.log(
    `  of which after kubectl exited (watch -> reconcile -> status): p50 ${pct(reconcile, 50).toFixed(0)} ms, p99 ${pct(reconcile, 99).toFixed(0)} ms`,
  );
};

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A run's life as an agent Pod gives it: queued, claimed (running) after a Pod start, finished after its work. */
const lifeOfRun = async (h: Harness, projectId: string, output: number): Promise<string> => {
  const id = await scriptRun(h, projectId);
  await h.reconcilers.runOwners.ownerOf(id); // the launcher asks before it creates the Pod
  await pause(400);
  await withTransaction(h.db.pool, (tx) => markRunRunning(tx, id));
  await pause(400);
  const chunk = "y".repeat(64 * 1024) + "\n";
  for (let left = output; left > 0; left -= 16 * chunk.length)
    await appendLogs(
      h.db.pool,
      id,
      null,
      Array.from({ length: 16 }, () => ({ stream: "stdout" as const, data: chunk })),
    );
  await withTransaction(h.db.pool, (tx) => finishRun(tx, id, { status: "succeeded", output: null, error: null }));
  await waitFor("FlowRun succeeded", async () => (await getCr(h, "flowruns", NS, id))?.status?.status === "succeeded", 10_000, 20);
  return id;
};

const writesPerRun = async (h: Harness, projectId: string): Promise<void> => {
  const counts: number[] = [];
  for (let i = 0; i < 10; i++) {
    const from = h.api.requests.length;
    const id = await lifeOfRun(h, projectId, 0);
    await pause(300); // let a late pass show itself
    counts.push(h.api.requests.slice(from).filter((r) => r.method !== "GET" && r.path.includes(`/flowruns`) && r.path.includes(id)).length);
  }
  console.log(`API writes per run (FlowRun creates and patches, no parks): ${counts.join(", ")}; max ${Math.max(...counts)}`);
};

const sizeFor10MiB = async (h: Harness, projectId: string): Promise<void> => {
  const id = await lifeOfRun(h, projectId, 10 * 1024 * 1024);
  const cr = await getCr(h, "flowruns", NS, id);
  console.log(
    `FlowRun object for a run that printed 10 MiB: ${Buffer.byteLength(JSON.stringify(cr))} bytes (summary ${cr?.status?.summary?.length ?? 0} chars)`,
  );
};

const main = async (): Promise<void> => {
  const h = await startHarness({ namespaces: [{ name: NS }], ttlSeconds: 3600 });
  try {
    await applyToReady(h);
    const { projectId } = await ensureProject(h);
    await writesPerRun(h, projectId);
    await sizeFor10MiB(h, projectId);
  } finally {
    await h.close();
  }
};

const ensureProject = async (h: Harness) => {
  await waitFor("project row", async () => (await findProject(h.db.pool, "default", NS)) !== undefined, 10_000);
  return (await findProject(h.db.pool, "default", NS))!;
};

await main();
