/**
 * Pipelines end to end (issue 11), with the real `flow` CLI and one real `flow server`: compile
 * errors with line and column (`flow check`, `flow submit`); a pipeline compiled to one graph run:
 * job ordering by `needs` (a job reads the output of the job it needs), `if:` skipping, workflow vs
 * job credentials (the job's wins; values masked); a `wait_for_event` job resumed by an emit, its
 * payload read downstream; an `approval:` job cleared with typed fields; `--credential` refused.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { REPO_ROOT, startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { FOLLOW_TIMEOUT, ended, ok, runIdIn, runKit, storedLog } from "./support/runs.js";
import { waitFor } from "./support/wait.js";

const WIDE = "pipe-wide-Tok-4410";
const NARROW = "pipe-narrow-Tok-7719";

let server: TestServer;
let dir: string;
const kit = runKit(
  () => server,
  () => dir,
);

interface NodeView {
  node_id: string;
  status: string;
  output: Record<string, unknown> | null;
  error: string | null;
}
interface PipelineView {
  status: string;
  nodes: NodeView[];
}

const view = (run: string): Promise<PipelineView> => kit.json<PipelineView>(["status", run]);
const node = (v: PipelineView, id: string): NodeView => {
  const n = v.nodes.find((x) => x.node_id === id);
  assert.ok(n, `no node ${id} in ${JSON.stringify(v.nodes)}`);
  return n;
};
const endsAs = async (run: string, want: string): Promise<PipelineView> => {
  const status = await ended(server, run);
  const v = await view(run);
  assert.equal(status, want, JSON.stringify(v, null, 2));
  return v;
};
const submit = async (name: string, yaml: string, args: string[] = []): Promise<string> =>
  runIdIn(ok(await server.cli(["submit", await kit.script(name, yaml), ...args])).stdout);
const sha16 = (s: string): string => createHash("sha256").update(s).digest("hex").slice(0, 16);

before(async () => {
  server = await startTestServer({ agents: 2 });
  dir = await scriptDir("flowsvc-pipelines-");
  ok(await server.cli(["credential", "set", "wide", "--kind", "bearer", "--token", "-"], { input: WIDE }));
  ok(await server.cli(["credential", "set", "narrow", "--kind", "bearer", "--token", "-"], { input: NARROW }));
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

void test("compile errors carry the YAML line and column, from flow check and from flow submit; --credential on a pipeline is refused", async () => {
  const bad = await kit.script(
    "bad.yaml",
    "credentials: {T: '${{ input.x }}'}\njobs:\n  a:\n    needs: [ghost]\n    steps: [{run: x}]\n    colour: red\n",
  );
  const check = await server.cli(["check", bad]);
  assert.equal(check.code, 2, check.stderr);
  assert.match(check.stderr, /^error: line 1, column 18: credentials\.T: a credentials: value is a credential NAME/m);
  assert.match(check.stderr, /^error: line 6, column 5: jobs\.a\.colour: unknown key "colour"/m);
  const cycle = await kit.script("cycle.yaml", "jobs:\n  a: {needs: b, steps: [{run: x}]}\n  b: {needs: [a], steps: [{run: x}]}\n");
  const submitted = await server.cli(["submit", cycle]);
  assert.equal(submitted.code, 2, submitted.stderr);
  assert.match(submitted.stderr, /line 2, column 14: jobs\.a\.needs: needs make a cycle: a -> b -> a/);
  const unknown = await server.cli(["submit", await kit.script("unknown.yml", "jobs:\n  a:\n    needs: zz\n    steps: [{run: x}]\n")]);
  assert.match(unknown.stderr, /line 3, column 12: jobs\.a\.needs: no job is named "zz"/);
  const cred = await server.cli(["submit", await kit.script("ok.yaml", "jobs: {a: {steps: [{run: x}]}}\n"), "--credential", "T=wide"]);
  assert.equal(cred.code, 2);
  assert.match(cred.stderr, /--credential is refused on a pipeline submit/);
  assert.equal(
    ok(await server.cli(["check", await kit.script("fine.yaml", "jobs: {a: {steps: [{run: x}]}}\n")])).stdout.trim(),
    "ok: pipeline, 1 jobs, 1 nodes, 0 edges",
  );
});

const ORDERED = `version: flowsvc/pipeline/v1
env: {WHO: ada}
credentials: {TOKEN: wide, OTHER: wide}
jobs:
  build:
    retry: {attempts: 2, backoff: 0s}
    steps:
      - run: echo "building for $WHO"
      - run: flow output set answer=\${{ input.n }}
  test:
    needs: build
    credentials: {TOKEN: narrow}
    steps:
      - run: |
          echo "token is $TOKEN"
          printf 'tok=%s other=%s\\n' "$(printf %s "$TOKEN" | sha256sum | cut -c1-16)" "$(printf %s "$OTHER" | sha256sum | cut -c1-16)"
          flow output set got=\${{ steps.build.output.answer }}
  skipped:
    needs: build
    if: \${{ input.n == 0 }}
    steps: [{run: echo never}]
  after_skip:
    needs: [skipped, test]
    steps: [{run: "flow output set skipped=\${{ needs.skipped.status }}"}]
`;

void test("needs orders the jobs (a job reads the output of the job it needs); if: skips; job credentials win over the workflow's, masked", async () => {
  const run = await submit("ordered.yaml", ORDERED, ["--input", '{"n": 42}']);
  const v = await endsAs(run, "succeeded");
  assert.deepEqual(
    v.nodes.map((n) => [n.node_id, n.status]),
    [
      ["build", "success"],
      ["test", "success"],
      ["skipped", "skipped"],
      ["after_skip", "success"],
    ],
  );
  assert.equal(node(v, "test").output?.["got"], "42");
  assert.equal(node(v, "after_skip").output?.["skipped"], "skipped");
  const stdout = String(node(v, "test").output?.["stdout"]);
  assert.match(stdout, new RegExp(`tok=${sha16(NARROW)} other=${sha16(WIDE)}`));
  const shown = JSON.stringify(v) + ok(await server.cli(["steps", run])).stdout;
  for (const secret of [WIDE, NARROW]) assert.ok(!shown.includes(secret), `the run shows ${secret}`);
});

void test("a wait_for_event job parks until its event; the payload is read downstream as steps.<job>.output.payload; an approval job clears with typed fields", async () => {
  const yaml = `jobs:
  wait:
    wait_for_event: {type: pipe.deployed, when: "\${{ event.payload.ok == true }}"}
  gate:
    needs: wait
    approval: {prompt: "ship \${{ steps.wait.output.payload.version }}?", fields: [{name: reason, type: text, required: true}]}
  use:
    needs: gate
    steps: [{run: "flow output set v=\${{ steps.wait.output.payload.version }} why=\${{ steps.gate.output.reason }}"}]
`;
  const run = await submit("wait.yaml", yaml);
  await waitFor("the wait job to park", async () => node(await view(run), "wait").status === "parked");
  ok(await server.cli(["emit", "pipe.deployed", "--payload", '{"ok": false, "version": "0"}']));
  ok(await server.cli(["emit", "pipe.other", "--payload", '{"ok": true, "version": "0"}']));
  ok(await server.cli(["emit", "pipe.deployed", "--payload", '{"ok": true, "version": "1.2"}']));
  await waitFor("the gate to park", async () => node(await view(run), "gate").status === "parked");
  ok(await server.cli(["approve", run, "gate", "--field", "reason=tests-pass"]));
  const v = await endsAs(run, "succeeded");
  assert.equal(node(v, "use").output?.["v"], "1.2");
  assert.equal(node(v, "use").output?.["why"], "tests-pass");
});

void test("the README's examples run: the CI pipeline through its approval to deploy, and the pipeline waiting for an event", async () => {
  const example = (name: string): string => join(REPO_ROOT, "examples", "pipelines", name);
  const ci = runIdIn(ok(await server.cli(["submit", example("ci.yaml"), "--input", '{"ref": "main"}'])).stdout);
  const waiting = runIdIn(ok(await server.cli(["submit", example("wait-for-event.yaml")])).stdout);
  await waitFor("the CI gate to park", async () => node(await view(ci), "gate").status === "parked");
  await waitFor("the wait job to park", async () => node(await view(waiting), "published").status === "parked");
  ok(await server.cli(["approve", ci, "gate", "--field", "reason=tests pass"]));
  ok(await server.cli(["emit", "release.published", "--payload", '{"ok": true, "version": "1.4.0"}']));
  const deployed = await endsAs(ci, "succeeded");
  assert.match(String(node(deployed, "deploy").output?.["stdout"]), /deploying hello-main\.tar \(tests pass\)/);
  const announced = await endsAs(waiting, "succeeded");
  assert.match(String(node(announced, "announce").output?.["stdout"]), /released 1\.4\.0/);
});

const emit = async (type: string, args: string[]): Promise<void> => {
  ok(await server.cli(["emit", type, ...args]));
};

void test("handler reactions: a pipeline snapshot (--as yaml), a stored graph (--graph) and one node (--node --config) each run for an event, reading it as input; a subject correlates a wait_for_event job", async () => {
  const yaml = `jobs:
  hello:
    steps: [{run: "flow output set type=\${{ input.type }} ref=\${{ input.payload.ref }}"}]
  ack:
    needs: hello
    wait_for_event: {type: hx.ack}
`;
  ok(await server.cli(["handler", "set", "hx-pipe", await kit.script("hx.yaml", yaml), "--as", "yaml", "--on", "hx.push", "--tag", "hx"]));
  // The snapshot: changing the file after registration changes nothing.
  await kit.script("hx.yaml", "jobs: {}\n");
  const graph = JSON.stringify({
    version: "flowsvc-graph/v1",
    nodes: [
      { id: "say", type: "emit", config: { type: "hx.said", payload: { $template: "ref {{ input.payload.ref }} of {{ input.type }}" } } },
    ],
    edges: [],
  });
  ok(await server.cli(["graph", "set", "hx-graph", await kit.script("hx-graph.json", graph)]));
  ok(await server.cli(["handler", "set", "hx-graph", "--graph", "hx-graph", "--on", "hx.push", "--tag", "hx"]));
  ok(
    await server.cli([
      "handler",
      "set",
      "hx-node",
      "--node",
      "emit",
      "--config",
      '{"type": "hx.noded", "payload": {"$expr": "input.payload"}}',
      "--on",
      "hx.push",
      "--tag",
      "hx",
    ]),
  );
  const listed = ok(await server.cli(["handler", "ls"])).stdout;
  for (const reaction of [/pipeline:hx\.yaml/, /graph:hx-graph/, /node:emit/]) assert.match(listed, reaction);
  const refused = await server.cli([
    "handler",
    "set",
    "hx-bad",
    await kit.script("bad.yaml", "jobs:\n  a:\n    needs: nope\n    steps: [{run: x}]\n"),
    "--as",
    "yaml",
    "--on",
    "hx.push",
  ]);
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(refused.stderr, /line 3, column \d+: jobs\.a\.needs/);

  await emit("hx.push", ["--key", "acme/web", "--payload", '{"ref": "main"}']);
  const runs = await kit.json<Array<{ id: string; filename: string }>>(["runs", "ls", "--tag", "hx"]);
  assert.equal(runs.length, 3, JSON.stringify(runs));
  const byFile = (f: string): string => runs.find((r) => r.filename === f)?.id ?? assert.fail(`no run of ${f}: ${JSON.stringify(runs)}`);
  const pipeRun = byFile("hx.yaml");
  await waitFor("the pipeline's ack job to park", async () => node(await view(pipeRun), "ack").status === "parked");
  assert.equal(node(await view(pipeRun), "hello").output?.["type"], "hx.push");
  assert.equal(node(await view(pipeRun), "hello").output?.["ref"], "main");
  // Another subject does not resume it; its own subject does.
  await emit("hx.ack", ["--key", "acme/other", "--payload", '{"from": "other-subject"}']);
  await emit("hx.ack", ["--key", "acme/web", "--payload", '{"from": "own-subject"}']);
  const acked = JSON.stringify(node(await endsAs(pipeRun, "succeeded"), "ack").output);
  assert.match(acked, /own-subject/);
  assert.doesNotMatch(acked, /other-subject/);
  await endsAs(byFile("graph:hx-graph"), "succeeded");
  assert.equal((await endsAs(byFile("node:emit"), "succeeded")).nodes[0]?.node_id, "reaction");
  const said = JSON.stringify(await kit.json<unknown>(["events", "ls", "--type", "hx.said"]));
  assert.match(said, /ref main of hx\.push/);
  const noded = JSON.stringify(await kit.json<unknown>(["events", "ls", "--type", "hx.noded"]));
  assert.match(noded, /"ref":"main"/);
});

void test("cancel_on: an event of a listed type cancels the run once; a keyed event only the run of its subject", async () => {
  const yaml = `cancel_on: [cx.stop]
jobs:
  hold:
    wait_for_event: {type: cx.never}
`;
  const manual = await submit("cx.yaml", yaml);
  ok(await server.cli(["handler", "set", "cx-pipe", await kit.script("cx.yaml", yaml), "--as", "yaml", "--on", "cx.push", "--tag", "cx"]));
  await emit("cx.push", ["--key", "acme/web"]);
  await emit("cx.push", ["--key", "acme/api"]);
  const started = await kit.json<Array<{ id: string }>>(["runs", "ls", "--tag", "cx"]);
  assert.equal(started.length, 2, JSON.stringify(started));
  for (const r of [manual, ...started.map((x) => x.id)])
    await waitFor(`${r} to park`, async () => node(await view(r), "hold").status === "parked");
  const subjectOf = async (id: string): Promise<string | undefined> =>
    (await kit.json<{ trigger: { key?: string } }>(["status", id])).trigger.key;
  const web = (await Promise.all(started.map(async (r) => ({ id: r.id, key: await subjectOf(r.id) })))).find(
    (r) => r.key === "acme/web",
  )!.id;
  const api = started.map((r) => r.id).find((id) => id !== web)!;
  // A keyed stop reaches the run of that subject and the subject-less manual run, not acme/api's.
  await emit("cx.stop", ["--key", "acme/web"]);
  assert.equal(await ended(server, web), "cancelled");
  assert.equal(await ended(server, manual), "cancelled");
  assert.equal((await view(api)).status, "parked");
  await emit("cx.stop", []);
  assert.equal(await ended(server, api), "cancelled");
  await emit("cx.stop", []);
  for (const id of [web, manual, api]) {
    const cancelled = await kit.json<Array<{ payload: { run_id?: string } }>>(["events", "ls", "--type", "run.cancelled"]);
    assert.equal(cancelled.filter((e) => e.payload.run_id === id).length, 1, `${id}: ${JSON.stringify(cancelled)}`);
  }
});

void test("concurrency: queue holds a later run queued until the group frees; cancel-running keeps only the newest, shared with flow lock", async () => {
  const yaml = (policy: string): string => `concurrency: {group: "qx-\${{ input.env }}", policy: ${policy}}
jobs:
  hold:
    wait_for_event: {type: qx.go}
`;
  const first = await submit("qx.yaml", yaml("queue"), ["--input", '{"env": "prod"}']);
  const second = await submit("qx.yaml", yaml("queue"), ["--input", '{"env": "prod"}']);
  await waitFor("the first run to park", async () => node(await view(first), "hold").status === "parked");
  assert.equal((await view(second)).status, "queued");
  await emit("qx.go", []);
  await endsAs(first, "succeeded");
  await waitFor("the second run to park once granted", async () => node(await view(second), "hold").status === "parked");
  await emit("qx.go", []);
  await endsAs(second, "succeeded");

  const older = await submit("qx.yaml", yaml("cancel-running"), ["--input", '{"env": "stage"}']);
  await waitFor("the older run to park", async () => node(await view(older), "hold").status === "parked");
  const newer = await submit("qx.yaml", yaml("cancel-running"), ["--input", '{"env": "stage"}']);
  assert.equal(await ended(server, older), "cancelled");
  await waitFor("the newer run to park", async () => node(await view(newer), "hold").status === "parked");
  // A script's flow lock on the group waits behind the pipeline: one lease table.
  const locker = await kit.start("qx-lock.sh", "flow lock qx-stage\nflow output set locked=yes\n");
  await waitFor("the script to park on the lock", async () => (await kit.json<{ status: string }>(["status", locker])).status === "parked");
  await emit("qx.go", []);
  await endsAs(newer, "succeeded");
  assert.equal(await ended(server, locker), "succeeded");
});

void test("flow spawn --as pipeline starts the pipeline as an independent graph run, replayed by position", async () => {
  const parent = await kit.start(
    "spawner.sh",
    `cat > child.yaml <<'Y'
jobs:
  a:
    steps: [{run: "flow output set spawned=yes"}]
Y
echo "child=$(flow spawn child.yaml --as pipeline)"
flow sleep 0s
`,
  );
  assert.equal(await ended(server, parent), "succeeded");
  const child = runIdIn(/child=(run-\S+)/.exec(await storedLog(server, parent))?.[1] ?? "");
  const v = await endsAs(child, "succeeded");
  assert.equal(node(v, "a").output?.["spawned"], "yes");
  // The replay after the sleep answered the recorded id: one child, not two.
  const children = await kit.json<Array<{ filename: string }>>(["runs", "ls"]);
  assert.equal(children.filter((r) => r.filename === "child.yaml").length, 1);
});

void test("flow follow of a pipeline run prefixes each log line with its job", async () => {
  const file = await kit.script(
    "follow.yaml",
    `jobs:
  build:
    steps: [{run: "echo one; echo two"}, {run: "echo three"}]
  test:
    needs: build
    steps: [{run: "echo four"}]
`,
  );
  const r = ok(await server.cli(["submit", file, "--follow"], FOLLOW_TIMEOUT));
  for (const line of ["[build] one", "[build] two", "[build] three", "[test] four"])
    assert.ok(r.stdout.split("\n").includes(line), r.stdout);
});

void test("a pipeline run is a flowsvc/pipeline/v1 run (status, run.* events); a job's group queues a later run's job, which shows its group; cancel-running supersedes the older run", async () => {
  const yaml = (policy: string): string => `env: {STAGE: jx}
jobs:
  deploy:
    concurrency: {group: "ship-\${{ env.STAGE }}-\${{ input.app }}", policy: ${policy}}
    wait_for_event: {type: jx.go}
`;
  // What the deploy job waits on: "event" once it holds the group, "concurrency" while queued behind it.
  const deployWaits = async (run: string): Promise<string | undefined> =>
    (await kit.json<{ nodes: Array<{ node_id: string; substate: { kind?: string } | null }> }>(["status", run])).nodes.find(
      (n) => n.node_id === "deploy",
    )?.substate?.kind;
  const first = await submit("jx.yaml", yaml("queue"), ["--input", '{"app": "web"}']);
  await waitFor("the first run's deploy to park on its event", async () => (await deployWaits(first)) === "event");
  const second = await submit("jx.yaml", yaml("queue"), ["--input", '{"app": "web"}']);
  await waitFor("the second run to park behind the group", async () => (await view(second)).status === "parked");
  const waiting = await kit.json<{ workflow: string; substate: unknown }>(["status", second]);
  assert.equal(waiting.workflow, "flowsvc/pipeline/v1");
  assert.deepEqual(waiting.substate, { name: "ship-jx-web", kind: "concurrency" });
  const table = ok(await server.cli(["status", second])).stdout;
  assert.match(table, /^substate:\s+ship-jx-web \(concurrency\)$/m);
  assert.match(table, /^workflow:\s+flowsvc\/pipeline\/v1 \(jx\.yaml\)$/m);
  await emit("jx.go", []);
  await endsAs(first, "succeeded");
  await waitFor("the second run's deploy to take the group and park on its event", async () => (await deployWaits(second)) === "event");
  await emit("jx.go", []);
  await endsAs(second, "succeeded");

  const older = await submit("jx.yaml", yaml("cancel-running"), ["--input", '{"app": "api"}']);
  await waitFor("the older run's deploy to park on its event", async () => (await deployWaits(older)) === "event");
  const newer = await submit("jx.yaml", yaml("cancel-running"), ["--input", '{"app": "api"}']);
  assert.equal(await ended(server, older), "cancelled");
  await waitFor("the newer run's deploy to park on its event", async () => (await deployWaits(newer)) === "event");
  await emit("jx.go", []);
  await endsAs(newer, "succeeded");
  type LifecycleEvent = { type: string; payload: { run_id?: string; workflow?: string; reason?: string } };
  const events = (await kit.json<LifecycleEvent[]>(["events", "ls", "--limit", "1000"])).filter((e) => e.type.startsWith("run."));
  const of = (id: string): string[] => events.filter((e) => e.payload.run_id === id).map((e) => `${e.type} ${e.payload.workflow}`);
  assert.deepEqual(of(older).sort(), ["run.cancelled flowsvc/pipeline/v1", "run.started flowsvc/pipeline/v1"]);
  assert.deepEqual(of(newer).sort(), ["run.started flowsvc/pipeline/v1", "run.succeeded flowsvc/pipeline/v1"]);
  assert.match(
    events.find((e) => e.type === "run.cancelled" && e.payload.run_id === older)?.payload.reason ?? "",
    /job deploy .*ship-jx-api/,
  );
});
